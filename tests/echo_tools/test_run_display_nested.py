"""`echo-tools run`'s live progress: a sub-workflow's inner calls as a nested block, and MCP progress and
log notifications as lines under their call. A real compiled workflow on the rehearsal model, a real MCP
server over stdio."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools.cli.output import LivePrinter
from echo_tools.executor import ToolExecutor
from echo_tools.models import ToolContext
from echo_tools.registry import ToolRegistry
from echo_tools.stores import AgentStore, WorkflowStore
from tests.echo_tools._mcp_support import SERVERS, make_executor, make_registry, stdio_config
from tests.workflow_bridge._compiler_support import MODULE, agent, tool_definitions, workflow

pytestmark = pytest.mark.slow


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _lines(text: str, *words: str) -> list[str]:
    return [line for line in text.splitlines() if all(w in line for w in words)]


def test_a_sub_workflows_inner_calls_show_as_a_nested_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workflow_bridge.runner import run_workflow

    workflows, agents = WorkflowStore(tmp_path / "wf"), AgentStore(tmp_path / "agents")
    researcher = agent("agt_r", name="Researcher", tools=["Echo"], output_schema=["findings"])
    inner, inner_agents = workflow([researcher], [], workflow_id="wf_research")
    lead = agent("agt_lead", name="Lead", tools=["Research"])
    outer, outer_agents = workflow([lead], [], workflow_id="wf_outer")
    for wf, wf_agents in ((inner, inner_agents), (outer, outer_agents)):
        workflows.save(wf)
        for a in wf_agents.values():
            agents.save(a)
    registry = ToolRegistry(allowed_modules=[MODULE], workflows=workflows, agents=agents)
    for definition in tool_definitions():
        registry.register(definition)
    registry.register({"tool_id": "research", "name": "Research", "tool_type": "workflow",
                       "execution_config": {"workflow_id": "wf_research"}})  # fmt: skip
    executor = ToolExecutor(registry)
    printer = LivePrinter(rich=False)
    run_workflow({"workflow": outer, "agents": outer_agents}, registry=registry, executor=executor,
                 user_input="nickel", on_event=printer)  # fmt: skip
    executor.close()
    out = capsys.readouterr().out

    (outer_start,) = _lines(out, "invoked", "Research  by Lead")  # not "by Researcher"
    (outer_end,) = _lines(out, "completed", "Research  by Lead")
    (inner_start,) = _lines(out, "invoked", "Echo")
    (inner_end,) = _lines(out, "completed", "Echo")
    assert _indent(outer_start) == _indent(outer_end) == 4
    assert _indent(inner_start) == _indent(inner_end) == 8  # one level deeper: the sub-workflow's block
    lines = out.splitlines()
    assert (
        lines.index(outer_start) < lines.index(inner_start) < lines.index(inner_end) < lines.index(outer_end)
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ToolRegistry, ToolExecutor]]:
    registry = make_registry(tmp_path)
    registry.add_mcp_server("content", stdio_config(SERVERS / "content_server.py"))
    executor = make_executor(registry)
    yield registry, executor
    executor.close()


def test_mcp_progress_and_log_notifications_show_under_their_call(
    served: tuple[ToolRegistry, ToolExecutor], capsys: pytest.CaptureFixture[str]
) -> None:
    _, executor = served
    printer = LivePrinter(rich=False)
    executor.add_sink(printer)
    result = executor.invoke_sync("mcp_content_slow_job", {"steps": 3}, ToolContext(run_id="run-1"))
    executor.remove_sink(printer)
    assert result.success
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]

    assert [line.split()[1] for line in lines] == [
        "invoked", "log", "progress", "progress", "progress", "log", "completed"
    ]  # fmt: skip
    assert _indent(lines[0]) == _indent(lines[-1]) == 4
    assert all(_indent(line) == 8 for line in lines[1:-1])  # under their call
    assert lines[1].split(None, 1)[1] == "log [info] starting 3 steps"
    assert lines[3].split(None, 1)[1] == "progress 2/3  step 2 of 3"
    assert lines[5].endswith("log [warning] done")
