"""Tool events name the calling agent (`agent_name`), from its context to the kept history and `events --run`.

`echo-tools events --run RUN_ID` showed `by agt_42c3...`: the canvas name was patched into displayed dicts
only. The name now rides in `ToolContext.agent_name`, is copied into every `ToolEvent` of the call, and
is kept with the event in the history (SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools.cli import main
from echo_tools.events import MemoryEventLog
from echo_tools.executor import ToolExecutor
from echo_tools.history import RunHistory
from echo_tools.models import ToolContext
from tests.workflow_bridge._compiler_support import agent, chain, make_registry
from workflow_bridge.plugin import ToolBindingPlugin

AGENT_ID = "agt_42c3a9d1e6f54b8c9d0e1f2a3b4c5d6e"


def call_echo(sink: object, context: ToolContext) -> None:
    executor = ToolExecutor(make_registry(), event_sinks=[sink])
    try:
        assert executor.invoke_sync("Echo", {"text": "hi"}, context).success
    finally:
        executor.close()


def test_a_calls_agent_name_is_copied_into_each_of_its_events():
    log = MemoryEventLog()
    context = ToolContext(agent_id=AGENT_ID, agent_name="Sum It", run_id="r1")
    call_echo(log, context)
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed"]
    assert {e.agent_name for e in log.events} == {"Sum It"}
    assert {e.to_dict()["agent_name"] for e in log.events} == {"Sum It"}
    assert context.ids()["agent_name"] == "Sum It"


def test_a_context_without_a_name_gives_events_without_one():
    log = MemoryEventLog()
    call_echo(log, ToolContext(agent_id=AGENT_ID))
    assert all(e.agent_name is None and "agent_name" not in e.to_dict() for e in log.events)


def test_the_plugins_context_for_an_echoai_agent_carries_its_name():
    context = ToolBindingPlugin.context_for({"agent_id": AGENT_ID, "name": "RFP Analyzer"}, {"run_id": "r1"})
    assert (context.agent_id, context.agent_name, context.run_id) == (AGENT_ID, "RFP Analyzer", "r1")


@pytest.mark.parametrize("store", ["sqlite", "postgres"])
def test_the_history_keeps_the_agent_name_with_each_event(store: str, request: pytest.FixtureRequest):
    if store == "postgres":
        from echo_tools.pg import PgRunHistory

        history: RunHistory | PgRunHistory = PgRunHistory(request.getfixturevalue("dsn"))
    else:
        history = RunHistory(request.getfixturevalue("tmp_path"))
    try:
        call_echo(history, ToolContext(agent_id=AGENT_ID, agent_name="Sum It", run_id="r1"))
        assert history.flush(10)
        kept = history.events(run_id="r1")
    finally:
        history.close()
    assert len(kept) == 2 and {e.agent_name for e in kept} == {"Sum It"}
    assert {e.agent_id for e in kept} == {AGENT_ID}


def test_events_of_a_run_show_the_calling_agent_by_its_canvas_name(capsys, tmp_path: Path):
    store = str(tmp_path / "store")
    wf, agents = chain(agent(AGENT_ID, name="Sum It", tools=["tool_calculator"], role="Sum It"))
    source = tmp_path / "workflow.json"
    source.write_text(json.dumps({"workflow": wf, "agents": agents}), encoding="utf-8")
    request = '{"operation": "add", "values": [2, 3]}'
    argv = ["--storage", store, "run", str(source), "--input", request, "--llm", "rehearsal"]
    assert main([*argv, "--run-id", "run_named"]) == 0
    capsys.readouterr()
    assert main(["--storage", store, "events", "--run", "run_named"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "tool_calculator" in line]
    assert lines and all(line.endswith("by Sum It") or "by Sum It  " in line for line in lines), out
    assert "by agt_" not in out
    assert main(["--storage", store, "events", "--run", "run_named", "--json"]) == 0
    events = json.loads(capsys.readouterr().out)["events"]
    tool_events = [e for e in events if e.get("tool_id")]
    assert tool_events and {e["agent_name"] for e in tool_events} == {"Sum It"}
    assert {e["agent_id"] for e in tool_events} == {AGENT_ID}
