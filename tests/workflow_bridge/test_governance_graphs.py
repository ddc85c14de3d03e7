"""Approvals inside graphs: a call needing approval pauses the run with a `tool_approval` interrupt (our
tools under LangChain's `create_agent`, `ExecutorToolNode`, CrewAI agent nodes of a compiled workflow)
and resumes with approve (runs once), reject (the model is told) or edit (new args, validated)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.governance import SqliteApprovalStore
from tests.workflow_bridge._compiler_support import agent, chain, run
from tests.workflow_bridge._fake_llms import ScriptedChatModel
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.langgraph_tools import make_tool_node, to_langchain_tools
from workflow_bridge.llm_rehearsal import RehearsalLLM

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, ToolMessage

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


def setup(**kwargs: Any) -> tuple[ToolRegistry, ToolExecutor, MemoryEventLog]:
    registry = ToolRegistry(allowed_modules=["tests.echo_tools.fixture_tools"])
    registry.register(WRITE)
    log = MemoryEventLog()
    return registry, ToolExecutor(registry, [log], egress=EgressPolicy.local(), **kwargs), log


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def agent_graph(
    registry: ToolRegistry, executor: ToolExecutor, path: Path, line: str = "hello"
) -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(
        steps=[[{"name": "write", "args": {"path": str(path), "line": line}, "id": "c1"}], "finished"]
    )
    tools = to_langchain_tools(["Write"], registry, executor, {"agent_name": "Scribe"})
    return create_agent(model, tools=tools, checkpointer=InMemorySaver()), model


def test_create_agent_pauses_at_the_call_and_an_approval_runs_it_once(tmp_path: Path) -> None:
    registry, executor, log = setup()
    out = tmp_path / "out.txt"
    graph, model = agent_graph(registry, executor, out)
    config = {"configurable": {"thread_id": "t-approve"}}
    paused = graph.invoke({"messages": [HumanMessage("write it")]}, config)
    (interrupt,) = paused["__interrupt__"]
    request = interrupt.value
    assert request["type"] == "tool_approval" and request["tool"] == "tool_write"
    assert request["args"] == {"path": str(out), "line": "hello"} and request["agent_name"] == "Scribe"
    assert request["approval_id"].startswith("apr_")
    assert lines(out) == [] and log.events == []  # nothing ran, no event: the call waits
    (pending,) = executor.governance.approvals.pending()
    assert pending.approval_id == request["approval_id"] and pending.run_id == "t-approve"

    final = graph.invoke(Command(resume="approve"), config)
    assert lines(out) == ["hello"]
    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == ["1"]
    assert executor.governance.approvals.get(request["approval_id"]).status == "done"  # type: ignore[union-attr]


def test_a_rejection_is_told_to_the_model_and_the_tool_never_runs(tmp_path: Path) -> None:
    registry, executor, _ = setup()
    out = tmp_path / "out.txt"
    graph, model = agent_graph(registry, executor, out)
    config = {"configurable": {"thread_id": "t-reject"}}
    graph.invoke({"messages": [HumanMessage("write it")]}, config)
    final = graph.invoke(Command(resume={"decision": "reject", "comment": "wrong file"}), config)
    assert lines(out) == []
    (message,) = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert (
        message.status == "error"
        and "rejected" in str(message.content)
        and "wrong file" in str(message.content)
    )
    assert final["messages"][-1].content == "finished"  # the model went on


def test_an_edit_runs_the_call_with_the_new_arguments_validated(tmp_path: Path) -> None:
    registry, executor, _ = setup()
    out = tmp_path / "out.txt"
    graph, _ = agent_graph(registry, executor, out)
    config = {"configurable": {"thread_id": "t-edit"}}
    graph.invoke({"messages": [HumanMessage("write it")]}, config)
    graph.invoke(Command(resume={"decision": "edit", "args": {"path": str(out), "line": "edited"}}), config)
    assert lines(out) == ["edited"]

    graph, _ = agent_graph(registry, executor, out, line="again")
    config = {"configurable": {"thread_id": "t-edit-bad"}}
    graph.invoke({"messages": [HumanMessage("write it")]}, config)
    final = graph.invoke(Command(resume={"decision": "edit", "args": {"path": str(out), "line": 7}}), config)
    (message,) = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error" and "input.line" in str(message.content)
    assert lines(out) == ["edited"]


def test_a_decision_taken_in_the_store_resumes_the_graph_with_decided(tmp_path: Path) -> None:
    store_file = tmp_path / "runs.sqlite"
    registry, executor, _ = setup(approvals=SqliteApprovalStore(store_file))
    out = tmp_path / "out.txt"
    graph, _ = agent_graph(registry, executor, out)
    config = {"configurable": {"thread_id": "t-store"}}
    approval_id = graph.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"][0].value[
        "approval_id"
    ]
    # another process decides: an executor on the same store
    _, reviewer, _ = setup(approvals=SqliteApprovalStore(store_file))
    record, result = reviewer.decide(approval_id, "approve", by="ops")
    assert result is None and record.kind == "run"  # a run's approval is carried on by resuming the run
    assert lines(out) == []
    graph.invoke(Command(resume="decided"), config)
    assert lines(out) == ["hello"]


def test_resuming_twice_or_replaying_the_node_never_runs_the_call_again(tmp_path: Path) -> None:
    registry, executor, _ = setup()
    out = tmp_path / "out.txt"
    model = ScriptedChatModel(
        steps=[
            [
                {"name": "write", "args": {"path": str(out), "line": "one"}, "id": "c1"},
                {"name": "write", "args": {"path": str(out), "line": "two"}, "id": "c2"},
            ],
            "finished",
        ]
    )
    node = make_tool_node(registry, executor, ["Write"])
    graph = create_agent(model, tools=node, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-two"}}
    first = graph.invoke({"messages": [HumanMessage("go")]}, config)
    assert len(first["__interrupt__"]) == 2  # the two calls run as two tasks: both wait
    decisions = {i.id: "approve" for i in first["__interrupt__"]}
    graph.invoke(Command(resume=decisions), config)
    assert sorted(lines(out)) == ["one", "two"]
    # the same decisions again (a double delivery): nothing is pending, nothing runs twice
    graph.invoke(Command(resume=decisions), config)
    assert sorted(lines(out)) == ["one", "two"]
    done = [
        r for r in [executor.governance.approvals.get(i.value["approval_id"]) for i in first["__interrupt__"]]
    ]
    assert all(r is not None and r.status == "done" for r in done)


def test_a_crewai_agent_node_of_a_workflow_pauses_and_resumes(tmp_path: Path) -> None:
    registry, executor, log = setup()
    out = tmp_path / "out.txt"
    wf, agents = chain(agent("scribe", tools=["tool_write"]), agent("end", "End", output_schema=["result"]))
    graph = WorkflowCompiler(registry, executor, llm=RehearsalLLM(), checkpointer=InMemorySaver()).compile(
        wf, agents
    )
    task = json.dumps({"path": str(out), "line": "from crew"})
    paused = run(graph, f"Write this: {task}", run_id="run_crew")
    (interrupt,) = paused["__interrupt__"]
    assert interrupt.value["type"] == "tool_approval" and interrupt.value["agent_name"] == "scribe"
    assert lines(out) == []
    final = graph.invoke(Command(resume="approve"), {"configurable": {"thread_id": "run_crew"}})
    assert lines(out) == ["from crew"]
    assert "1" in final["crew_result"]
    completed = [e for e in log.events if e.type == "tool.completed" and e.tool_id == "tool_write"]
    assert len(completed) == 1 and completed[0].agent_name == "scribe"


async def test_an_executor_tool_node_pauses_for_its_calls_and_runs_each_approved_one_once(
    tmp_path: Path,
) -> None:
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph

    registry, executor, _ = setup()
    out = tmp_path / "out.txt"
    calls = [
        {"name": "write", "args": {"path": str(out), "line": line}, "id": f"c{i}"}
        for i, line in enumerate(("one", "two"))
    ]
    node = make_tool_node(registry, executor, ["Write"])
    graph = StateGraph(MessagesState).add_node("tools", node).add_edge(START, "tools")
    app = graph.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t-node"}}
    state = await app.ainvoke({"messages": [AIMessage("", tool_calls=calls)]}, config)
    asked = [state["__interrupt__"][0].value["args"]["line"]]
    state = await app.ainvoke(Command(resume="approve"), config)  # the first call runs; the second asks
    asked.append(state["__interrupt__"][0].value["args"]["line"])
    assert asked == ["one", "two"] and lines(out) == ["one"]  # in call order, one pause at a time
    state = await app.ainvoke(Command(resume={"decision": "reject", "comment": "just one"}), config)
    assert "__interrupt__" not in state
    assert lines(out) == ["one"]  # the first ran once, even though the node ran three times
    first, second = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert first.content == "1" and second.status == "error" and "just one" in str(second.content)
