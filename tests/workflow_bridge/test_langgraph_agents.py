"""Catalogue tools in LangChain's `create_agent` and LangGraph's `create_react_agent`, and the doc's example."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import typing
import warnings
from pathlib import Path

import pytest

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, ToolMessage
    from langgraph.prebuilt import ToolNode, create_react_agent

    from echo_tools.models import ToolContext
    from tests.workflow_bridge._fake_llms import ScriptedChatModel
    from workflow_bridge.langgraph_tools import ExecutorToolNode, make_tool_node, to_langchain_tools

ROOT = Path(__file__).resolve().parents[2]
CONTEXT = ToolContext(agent_id="agent-7", workflow_id="wf-1", run_id="run-1", node_id="node-3")
REACT_MOVED = "ignore:create_react_agent has been moved"


def call(name: str, call_id: str, **args: typing.Any) -> dict[str, typing.Any]:
    return {"name": name, "args": args, "id": call_id}


def custom_events(chunks: list[tuple[str, typing.Any]]) -> list[tuple[str, str | None]]:
    return [(c["type"], c.get("tool_call_id")) for mode, c in chunks if mode == "custom"]


# -- create_react_agent -------------------------------------------------------------------------------


def test_the_node_is_a_langgraph_tool_node_exposing_its_tools(registry, executor):
    node = make_tool_node(registry, executor, ["add", {"tool_id": "tool_lookup", "fixed": {"limit": 1}}])
    assert isinstance(node, ToolNode)
    assert sorted(node.tools_by_name) == ["add", "lookup"]
    assert "limit" not in node.tools_by_name["lookup"].args_schema["properties"]
    assert [t.name for t in node] == ["add", "lookup"]


@pytest.mark.filterwarnings(REACT_MOVED)
def test_create_react_agent_takes_the_node_and_runs_calls_through_the_executor(registry, executor, log):
    model = ScriptedChatModel(steps=[[call("add", "c1", a=1, b=2), call("shout", "c2", text="hi")], "Done."])
    agent = create_react_agent(model, make_tool_node(registry, executor, ["add", "shout"], CONTEXT))
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom", "values"]))

    assert model.bound_tools == ["add", "shout"]
    final = [c for mode, c in chunks if mode == "values"][-1]
    contents = {m.tool_call_id: m.content for m in final["messages"] if isinstance(m, ToolMessage)}
    assert contents == {"c1": "3", "c2": "HI"} and final["messages"][-1].content == "Done."
    assert {e.agent_id for e in log.events} == {"agent-7"}
    assert sorted(custom_events(chunks)) == [
        ("tool.completed", "c1"),
        ("tool.completed", "c2"),
        ("tool.invoked", "c1"),
        ("tool.invoked", "c2"),
    ]


@pytest.mark.filterwarnings(REACT_MOVED)
async def test_create_react_agent_with_the_node_runs_async_and_reports_unknown_tools(registry, executor):
    model = ScriptedChatModel(steps=[[call("ghost", "c1")], "Gave up."])
    agent = create_react_agent(model, ExecutorToolNode(registry, executor, ["add"]))
    result = await agent.ainvoke({"messages": [HumanMessage("go")]})

    (message,) = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error" and "'ghost' is not a valid tool" in message.content
    assert "add" in message.content


def test_a_node_without_refs_offers_every_enabled_catalogue_tool(registry, executor):
    node = ExecutorToolNode(registry, executor)
    assert set(node.tools_by_name) == {
        t.llm_name for t in registry.list_all() if t.status.value != "disabled"
    }


# -- create_agent ---------------------------------------------------------------------------------------


def test_create_agent_runs_our_tools_and_their_events_reach_the_custom_stream(registry, executor, log):
    model = ScriptedChatModel(steps=[[call("add", "c1", a=2, b=40)], [call("add", "c2", a="x", b=1)], "ok"])
    agent = create_agent(model, tools=to_langchain_tools(["add", "lookup"], registry, executor, CONTEXT))
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom", "values"]))

    assert model.bound_tools == ["add", "lookup"]
    assert custom_events(chunks) == [
        ("tool.invoked", "c1"),
        ("tool.completed", "c1"),
        ("tool.failed", "c2"),  # refused by validation: it never started
    ]
    failed = [c for mode, c in chunks if mode == "custom"][-1]
    assert failed["agent_id"] == "agent-7" and "input.a" in failed["error"]
    final = [c for mode, c in chunks if mode == "values"][-1]
    first, second = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert (first.content, first.artifact.output) == ("42", 42)
    assert second.status == "error" and 'input.a: "x"' in second.content
    assert [(e.type, e.tool_call_id) for e in log.events] == [(t, c) for t, c in custom_events(chunks)]


async def test_create_agent_takes_the_node_itself_and_streams_events_when_run_async(registry, executor):
    model = ScriptedChatModel(steps=[[call("shout", "c1", text="hey")], "done"])
    agent = create_agent(model, tools=make_tool_node(registry, executor, ["shout"], CONTEXT))
    chunks = [c async for c in agent.astream({"messages": [HumanMessage("go")]}, stream_mode=["custom"])]

    assert model.bound_tools == ["shout"]
    assert custom_events(chunks) == [("tool.invoked", "c1"), ("tool.completed", "c1")]
    assert chunks[-1][1]["output"] == "HEY"


def test_a_tool_called_outside_a_graph_writes_nothing_and_still_answers(registry, executor, log):
    (add,) = to_langchain_tools(["add"], registry, executor)
    assert add.invoke({"a": 1, "b": 1}) == "2"
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed"]


# -- the doc's example ---------------------------------------------------------------------------------


def doc_block(heading: str) -> str:
    """The first python block under `heading` in docs/langgraph.md."""
    text = (ROOT / "docs" / "langgraph.md").read_text()
    section = text.split(heading, 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match is not None, f"no python block under {heading!r}"
    return match.group(1)


@pytest.mark.slow
def test_the_create_agent_example_of_the_doc_runs_as_written(tmp_path):
    readme = (ROOT / "README.md").read_text()
    my_tools = re.search(r"```python\n# my_tools.py\n(.*?)```", readme, re.S)
    assert my_tools is not None
    (tmp_path / "my_tools.py").write_text(my_tools.group(1))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-c", doc_block("## LangChain's create_agent")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "updates ['model']",
        "custom tool.invoked",
        "custom tool.completed",
        "updates ['tools']",
        "updates ['model']",
        "2 + 40 = 42.",
    ]


@pytest.mark.filterwarnings(REACT_MOVED)
def test_a_sync_graph_streams_the_events_of_every_call_of_one_message(registry, executor):
    model = ScriptedChatModel(steps=[[call("add", "c1", a=1, b=1), call("shout", "c2", text="a")], "ok"])
    # version v1: the node gets both calls at once and runs them on the background loop
    agent = create_react_agent(model, make_tool_node(registry, executor, ["add", "shout"]), version="v1")
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom"]))
    assert sorted(custom_events(chunks)) == [
        ("tool.completed", "c1"),
        ("tool.completed", "c2"),
        ("tool.invoked", "c1"),
        ("tool.invoked", "c2"),
    ]


def test_a_sync_agent_streams_the_events_of_an_async_tool_run_on_the_background_loop(registry, executor):
    model = ScriptedChatModel(steps=[[call("shout", "c1", text="hey")], "done"])
    agent = create_agent(model, tools=to_langchain_tools(["shout"], registry, executor, CONTEXT))
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom"]))
    assert custom_events(chunks) == [("tool.invoked", "c1"), ("tool.completed", "c1")]
    assert chunks[-1][1]["output"] == "HEY" and chunks[-1][1]["agent_id"] == "agent-7"


def test_a_node_without_refs_offers_tools_registered_after_it_was_built(registry, executor):
    node = ExecutorToolNode(registry, executor)
    before = set(node.tools_by_name)
    registry.register(
        registry.require("add").model_copy(update={"tool_id": "tool_add_later", "name": "add later"})
    )
    assert set(node.tools_by_name) - before == {"add_later"}
