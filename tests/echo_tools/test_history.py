"""RunHistory keeps every tool event in SQLite and answers queries by run, tool, agent and time."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from echo_tools import ToolContext, ToolDef, ToolExecutor, ToolRegistry
from echo_tools.errors import ToolStorageError
from echo_tools.events import ToolEvent
from echo_tools.history import HISTORY_FILE, MAX_LIMIT, RunHistory


def _event(kind: str = "tool.invoked", **ids: str) -> ToolEvent:
    return ToolEvent(type=kind, tool_id=ids.pop("tool_id", "tool_a"), **ids)


def test_a_folder_gets_runs_sqlite_and_events_come_back_oldest_first(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    assert history.path == tmp_path / HISTORY_FILE
    first, second = _event(run_id="r1"), _event("tool.completed", run_id="r1")
    history(first)
    history(second)
    history(_event(run_id="r2"))
    got = history.events(run_id="r1")
    assert [e.event_id for e in got] == [first.event_id, second.event_id]
    assert [e.type for e in got] == ["tool.invoked", "tool.completed"]


def test_filters_combine_and_limit_caps_the_answer(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    for i in range(5):
        history(_event(run_id="r", agent_id="a1" if i % 2 else "a2", tool_id=f"tool_{i % 2}"))
    assert len(history.events(run_id="r", agent_id="a1")) == 2
    assert {e.tool_id for e in history.events(tool_id="tool_0")} == {"tool_0"}
    assert len(history.events(run_id="r", limit=3)) == 3
    assert history.events(run_id="nope") == []


def test_since_keeps_only_later_events(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    old = _event(run_id="r")
    old.timestamp = "2020-01-01T00:00:00.000000Z"
    history(old)
    new = _event(run_id="r")
    history(new)
    assert [e.event_id for e in history.events(since="2021-01-01T00:00:00Z")] == [new.event_id]
    assert [e.event_id for e in history.events(since="2021-01-01T01:00:00+01:00")] == [new.event_id]


@pytest.mark.parametrize("limit", [0, -1, MAX_LIMIT + 1, "10", True])
def test_a_limit_out_of_range_is_refused_naming_it(tmp_path: Path, limit: object) -> None:
    with pytest.raises(ValueError, match=rf"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}"):
        RunHistory(tmp_path).events(limit=limit)  # type: ignore[arg-type]


def test_a_malformed_since_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="since must be an ISO 8601 time.*'yesterday'"):
        RunHistory(tmp_path).events(since="yesterday")


def test_an_event_kept_twice_is_stored_once(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    event = _event(run_id="r")
    history(event)
    history(event)
    assert history.count() == 1


def test_runs_summarise_calls_and_failures_newest_first(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    for kind in ("tool.invoked", "tool.completed", "tool.invoked", "tool.failed"):
        history(_event(kind, run_id="r1", workflow_id="wf"))
    history(_event(run_id="r2", workflow_id="other"))
    history(_event())  # no run: not a run
    runs = history.runs()
    assert [r.run_id for r in runs] == ["r2", "r1"]
    assert (runs[1].calls, runs[1].failed, runs[1].workflow_id) == (2, 1, "wf")
    assert [r.run_id for r in history.runs(workflow_id="wf")] == ["r1"]
    assert runs[1].to_dict()["calls"] == 2


def test_prune_forgets_events_past_retention(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    old = _event(run_id="r")
    old.timestamp = (datetime.now(UTC) - timedelta(days=31)).isoformat().replace("+00:00", "Z")
    history(old)
    history(_event(run_id="r"))
    assert history.prune(days=30) == 1
    assert history.count() == 1
    with pytest.raises(ValueError, match="days must be positive, got 0"):
        history.prune(days=0)


def test_the_history_outlives_the_process_that_wrote_it(tmp_path: Path) -> None:
    code = (
        "import sys; from echo_tools.history import RunHistory; from echo_tools.events import ToolEvent;"
        "h = RunHistory(sys.argv[1]); h(ToolEvent(type='tool.invoked', tool_id='t', run_id='kept'))"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60)
    assert [e.run_id for e in RunHistory(tmp_path).events(run_id="kept")] == ["kept"]


def test_threads_writing_at_once_lose_nothing(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)

    def write(n: int) -> None:
        for _ in range(50):
            history(_event(run_id=f"r{n}"))

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert history.count() == 200
    assert all(len(history.events(run_id=f"r{n}", limit=MAX_LIMIT)) == 50 for n in range(4))


def test_a_schema_newer_than_this_version_is_refused_not_changed(tmp_path: Path) -> None:
    RunHistory(tmp_path).close()
    db = sqlite3.connect(tmp_path / HISTORY_FILE)
    db.execute("INSERT INTO schema_version (version) VALUES (99)")
    db.commit()
    db.close()
    with pytest.raises(ToolStorageError, match="schema version 99, newer than this echo-tools knows"):
        RunHistory(tmp_path)


def test_a_file_that_is_not_a_database_is_a_storage_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "runs.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ToolStorageError, match="cannot open the run history .*runs.sqlite"):
        RunHistory(bad)
    assert bad.read_bytes() == b"not a database at all" * 100


async def test_as_an_executor_sink_it_keeps_the_calls_of_a_run(tmp_path: Path) -> None:
    history = RunHistory(tmp_path / "store")
    registry = ToolRegistry(storage_dir=tmp_path / "store", allowed_modules=["tests"])
    registry.register(
        ToolDef(
            tool_id="tool_as_text",
            name="As text",
            execution_config={"module": "tests.echo_tools.fixture_tools.basic", "function": "as_text"},
            input_schema={"type": "object", "properties": {"word": {"type": "string"}}},
        )
    )
    executor = ToolExecutor(registry, event_sinks=[history])
    try:
        result = await executor.invoke(
            "tool_as_text", {"word": "hi"}, ToolContext(run_id="run-1", agent_id="a")
        )
    finally:
        await executor.aclose()
    assert result.success, result.error
    assert executor.events.flush(10)  # on a loop, sinks get events from the delivery thread
    kept = history.events(run_id="run-1")
    assert [e.type for e in kept] == ["tool.invoked", "tool.completed"]
    assert kept[1].output == result.output
    assert history.runs()[0].run_id == "run-1"


def test_a_run_is_recorded_with_its_source_and_its_status_moves(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    assert history.run("r1") is None
    history.start_run("r1", {"workflow": {"workflow_id": "wf"}, "agents": {}}, workflow_id="wf")
    assert history.run("r1")["status"] == "running"
    history.set_status("r1", "interrupted")
    record = RunHistory(tmp_path).run("r1")
    assert record["status"] == "interrupted"
    assert record["source"] == {"workflow": {"workflow_id": "wf"}, "agents": {}}
    with pytest.raises(ValueError, match="status must be one of .* got 'paused'"):
        history.set_status("r1", "paused")


def test_the_checkpointer_keeps_langgraph_state_in_the_same_file(tmp_path: Path) -> None:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        n: int

    graph = StateGraph(State)
    graph.add_node("inc", lambda s: {"n": s["n"] + 1})
    graph.add_edge(START, "inc")
    graph.add_edge("inc", END)
    config = {"configurable": {"thread_id": "t1"}}
    graph.compile(checkpointer=RunHistory(tmp_path).checkpointer()).invoke({"n": 1}, config)
    again = graph.compile(checkpointer=RunHistory(tmp_path).checkpointer())
    assert again.get_state(config).values == {"n": 2}


def test_claiming_a_paused_run_succeeds_once(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    history.start_run("r", {"workflow": {}}, workflow_id="wf")
    history.set_status("r", "interrupted")
    other = RunHistory(tmp_path)  # another process's view of the same file
    assert history.claim_run("r") is True
    assert other.claim_run("r") is False  # the second resume of the same pause loses
    assert other.run("r")["status"] == "running"
    assert history.claim_run("unknown") is False


def test_a_run_id_already_recorded_is_not_recorded_again(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    assert history.start_run("r1", {"source": {"a": 1}, "owner": "alice"}, workflow_id="wf") is True
    history.set_status("r1", "interrupted")
    assert history.start_run("r1", {"source": {"b": 2}}, workflow_id="other") is False
    record = history.run("r1")
    assert record is not None
    assert (record["status"], record["source"]["source"], record["owner"]) == (
        "interrupted",
        {"a": 1},
        "alice",
    )
    assert history.start_run("r1", {"source": {"b": 2}}, replace=True) is True
    assert history.run("r1")["owner"] == "operator"  # type: ignore[index]  # no owner kept: the operator's


def test_events_come_newest_first_when_asked(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    for index in range(5):
        history(_event(run_id="r", tool_id=f"t{index}"))
    assert [e.tool_id for e in history.events(limit=2, newest_first=True)] == ["t4", "t3"]
    assert [e.tool_id for e in history.events(limit=2)] == ["t0", "t1"]
