"""Red-team review of issue 34: approvals asked inside a graph (kind `run`) and the per-principal bound of
pending approvals. Real LangGraph (`create_agent` with a scripted model) and the SQLite approval store.

Each `xfail(strict=True)` test is a finding (it asserts what should happen and fails on main today); the
other tests are attacks that held."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.gate import CallScope, Grants, Principal, acting_as
from echo_tools.governance import SqliteApprovalStore
from echo_tools.governance import approvals as ap
from tests.workflow_bridge._fake_llms import ScriptedChatModel
from workflow_bridge.langgraph_tools import to_langchain_tools

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

SIDE = "tests.echo_tools.fixture_tools.side_effects"
WRITE = {
    "name": "Write",
    "description": "Append a line to a file.",
    "tool_type": "local",
    "input_schema": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "line": {"type": "string", "maxLength": 20}},
        "required": ["path", "line"],
    },
    "execution_config": {"module": SIDE, "function": "append_line"},
    "approval": "always",
}
MALLORY = Principal("mallory", Grants(actions=("run",)))  # may run, may not decide


def _setup(tmp_path: Path) -> tuple[ToolRegistry, ToolExecutor]:
    registry = ToolRegistry(
        storage_dir=tmp_path / "store", allowed_modules=["tests.echo_tools.fixture_tools"]
    )
    registry.register(WRITE)
    store = SqliteApprovalStore(tmp_path / "store")
    return registry, ToolExecutor(registry, [MemoryEventLog()], egress=EgressPolicy.local(), approvals=store)


def _paused_run(registry: ToolRegistry, executor: ToolExecutor, path: Path, thread: str) -> dict[str, Any]:
    model = ScriptedChatModel(
        steps=[[{"name": "write", "args": {"path": str(path), "line": thread}, "id": "c1"}], "finished"]
    )
    tools = to_langchain_tools(["Write"], registry, executor, {"agent_name": "Scribe"})
    graph = create_agent(model, tools=tools, checkpointer=InMemorySaver())
    return dict(
        graph.invoke({"messages": [HumanMessage("write it")]}, {"configurable": {"thread_id": thread}})
    )


def test_approvals_asked_inside_graphs_count_against_the_principal_s_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ap, "MAX_PENDING", 3)
    registry, executor = _setup(tmp_path)
    with acting_as(CallScope.admit(MALLORY)):
        for n in range(5):
            _paused_run(registry, executor, tmp_path / "out.txt", f"t-{n}")
    store = executor.governance.approvals
    mine = store.pending(100, owner="mallory", every_owner=False)
    executor.close()
    assert len(mine) <= 3, f"mallory has {len(mine)} approvals pending; the bound is 3"


def test_a_graph_approval_keeps_the_asking_principal_and_runs_under_its_scope_on_resume(
    tmp_path: Path,
) -> None:
    """Held: the paused call's approval is mallory's (owner and sealed scope), and a resume that comes
    with no scope of its own runs it as mallory, once."""
    registry, executor = _setup(tmp_path)
    out = tmp_path / "out.txt"
    model = ScriptedChatModel(
        steps=[[{"name": "write", "args": {"path": str(out), "line": "hello"}, "id": "c1"}], "finished"]
    )
    tools = to_langchain_tools(["Write"], registry, executor, {"agent_name": "Scribe"})
    graph = create_agent(model, tools=tools, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-owner"}}
    with acting_as(CallScope.admit(MALLORY)):
        paused = graph.invoke({"messages": [HumanMessage("write it")]}, config)
    (interrupt,) = paused["__interrupt__"]
    record = executor.governance.approvals.get(interrupt.value["approval_id"])
    assert record is not None and record.kind == "run" and record.owner == "mallory"
    assert record.scope is not None and record.scope["principal"] == "mallory"
    with acting_as(CallScope.admit(MALLORY)):
        graph.invoke(Command(resume="approve"), config)
        graph.invoke(Command(resume="approve"), config)  # a second resume of the same pause
    executor.close()
    assert out.read_text().splitlines() == ["hello"]
