"""LangGraph adapter: real graphs (agent -> tools -> agent) with a scripted chat model calling catalogue tools."""

from __future__ import annotations

import typing
import warnings

import pytest

# crewai 1.15's own import (pulled in by the scripted models) trips an ImportWarning that
# filterwarnings=error would turn into a collection error.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, create_react_agent, tools_condition

    from echo_tools.models import ToolContext, ToolResult
    from tests.workflow_bridge._fake_llms import ScriptedChatModel
    from tests.workflow_bridge.fixture_tools.basic import Concurrency
    from workflow_bridge.langgraph_tools import (
        ExecutorToolNode,
        make_tool_node,
        to_langchain_tool,
        to_langchain_tools,
    )

CONTEXT = ToolContext(agent_id="agent-7", workflow_id="wf-1", run_id="run-1", node_id="node-3")
TOOLS = ["add", "lookup", "explode", "track", "shout", "configure"]


def agent_graph(model: ScriptedChatModel, tools_node: typing.Any) -> typing.Any:
    """agent -> tools -> agent, routed by LangGraph's own tools_condition."""

    def agent(state: MessagesState) -> dict[str, typing.Any]:
        return {"messages": [model.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools_node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile()


def tool_messages(result: dict[str, typing.Any]) -> list[ToolMessage]:
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def call(name: str, call_id: str, **args: typing.Any) -> dict[str, typing.Any]:
    return {"name": name, "args": args, "id": call_id}


# -- ExecutorToolNode ------------------------------------------------------------------------------


def test_two_calls_in_one_message_come_back_in_call_order_with_the_agents_context(registry, executor, log):
    model = ScriptedChatModel(steps=[[call("add", "c1", a=1, b=2), call("lookup", "c2", query="q")]])
    graph = agent_graph(model, make_tool_node(registry, executor, TOOLS, CONTEXT))
    result = graph.invoke({"messages": [HumanMessage("go")]})

    first, second = tool_messages(result)
    assert (first.tool_call_id, first.name, first.content, first.status) == ("c1", "add", "3", "success")
    assert second.content == '{"query": "q", "options": {"region": "eu"}}'
    assert isinstance(first.artifact, ToolResult) and first.artifact.output == 3
    assert sorted(e.tool_call_id for e in log.of_type("tool.completed")) == ["c1", "c2"]
    assert {(e.agent_id, e.workflow_id, e.run_id, e.node_id) for e in log.events} == {
        ("agent-7", "wf-1", "run-1", "node-3")
    }
    assert (
        result["messages"][-1].content
        == 'Done. Last tool result: {"query": "q", "options": {"region": "eu"}}'
    )


def test_unknown_tools_and_failing_tools_are_error_messages_not_crashes(registry, executor, log):
    model = ScriptedChatModel(
        steps=[[call("nope", "c1"), call("explode", "c2", reason="boom"), call("add", "c3", a="x", b=1)]]
    )
    graph = agent_graph(model, make_tool_node(registry, executor, ["add", "explode"], CONTEXT))
    unknown, failing, invalid = tool_messages(graph.invoke({"messages": [HumanMessage("go")]}))

    assert (
        unknown.status == "error"
        and unknown.content == "Error: 'nope' is not a valid tool, try one of [add, explode]."
    )
    assert failing.status == "error" and failing.content.startswith("Tool 'explode' failed (execution):")
    assert "exploded: boom" in failing.content and failing.artifact.error_type == "execution"
    assert invalid.content == (
        'Tool \'add\' failed (validation): invalid input: input.a: "x" is not of type "number". '
        "Fix the arguments and try again."
    )
    assert [e.type for e in log.events if e.tool_id == "tool_explode"] == ["tool.invoked", "tool.failed"]


def test_a_node_only_runs_the_tools_it_was_given(registry, executor, log):
    node = make_tool_node(registry, executor, ["add"])
    (message,) = node.invoke([AIMessage("", tool_calls=[call("explode", "c1", reason="r")])])
    assert message.status == "error" and "'explode' is not a valid tool" in message.content
    assert log.events == []


def test_tool_events_stream_to_the_custom_mode_as_they_happen(registry, executor):
    model = ScriptedChatModel(steps=[[call("add", "c1", a=1, b=2)], [call("nope", "c2")]])
    graph = agent_graph(model, make_tool_node(registry, executor, ["add"], CONTEXT))
    chunks = list(graph.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom", "updates"]))

    order = [("custom", c["type"]) if mode == "custom" else ("updates", next(iter(c))) for mode, c in chunks]
    assert order == [
        ("updates", "agent"),
        ("custom", "tool.invoked"),
        ("custom", "tool.completed"),
        ("updates", "tools"),
        ("updates", "agent"),
        ("custom", "tool.failed"),
        ("updates", "tools"),
        ("updates", "agent"),
    ]
    completed = chunks[2][1]
    assert (
        completed["tool_call_id"] == "c1" and completed["output"] == 3 and completed["agent_id"] == "agent-7"
    )
    assert chunks[5][1]["error_type"] == "not_found" and chunks[5][1]["tool_name"] == "nope"


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_calls_of_one_message_run_concurrently_up_to_the_bound(registry, executor, mode):
    calls = [call("track", f"c{i}", label=str(i)) for i in range(6)]
    for limit, expected_peak in [(8, 6), (2, 2)]:
        Concurrency.reset(target=expected_peak)
        node = ExecutorToolNode(registry, executor, ["track"], max_concurrency=limit)
        state = {"messages": [AIMessage("", tool_calls=calls)]}
        result = node.invoke(state) if mode == "sync" else await node.ainvoke(state)
        assert [m.content for m in result["messages"]] == [str(i) for i in range(6)]
        assert Concurrency.peak == expected_peak


async def test_async_graph_runs_the_node_and_streams_its_events(registry, executor, log):
    model = ScriptedChatModel(steps=[[call("shout", "c1", text="hi"), call("add", "c2", a=2, b=2)]])
    graph = agent_graph(model, make_tool_node(registry, executor, TOOLS, CONTEXT))
    events = []
    async for mode, chunk in graph.astream(
        {"messages": [HumanMessage("go")]}, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append((chunk["type"], chunk["tool_call_id"]))
        else:
            result = chunk
    assert [m.content for m in tool_messages(result)] == ["HI", "4"]
    assert len(log.of_type("tool.completed")) == 2
    assert sorted(events) == [
        ("tool.completed", "c1"),
        ("tool.completed", "c2"),
        ("tool.invoked", "c1"),
        ("tool.invoked", "c2"),
    ]


def test_bindings_hide_fixed_parameters_in_the_node_too(registry, executor, log):
    binding = {"tool_id": "tool_lookup", "fixed": {"limit": 2}}
    node = make_tool_node(registry, executor, [binding])
    (message,) = node.invoke([AIMessage("", tool_calls=[call("lookup", "c1", query="q", limit=99)])])
    assert message.content == '{"query": "q", "options": {"limit": 2, "region": "eu"}}'


def test_bindings_may_come_paired_with_their_tool(registry, executor):
    pairs = [
        (registry.require("lookup"), {"fixed": {"mode": "fast"}}),
        ("add", None),
        ("explode", {"enabled": False}),
    ]
    node = make_tool_node(registry, executor, pairs)
    assert node.tool_names == ["add", "lookup"]
    (message,) = node.invoke([AIMessage("", tool_calls=[call("lookup", "c1", query="q")])])
    assert message.content == '{"query": "q", "options": {"mode": "fast", "region": "eu"}}'


def test_optional_fields_sent_as_null_never_reach_the_tool(registry, executor, log):
    node = make_tool_node(registry, executor, ["lookup", "configure"])
    nested = {"settings": {"name": "n", "retries": None, "owner": {"id": "u", "email": None}}, "label": None}
    lookup, configure = node.invoke(
        [
            AIMessage(
                "",
                tool_calls=[
                    call("lookup", "c1", query="q", limit=None, tags=None),
                    call("configure", "c2", **nested),
                ],
            )
        ]
    )
    assert lookup.status == configure.status == "success", (lookup.content, configure.content)
    assert configure.artifact.output == {"settings": {"name": "n", "owner": {"id": "u"}}, "label": "default"}


# -- StructuredTool in LangGraph's own ToolNode and agent -------------------------------------------


def test_stock_tool_node_runs_our_tools_with_the_call_id_in_the_context(registry, executor, log):
    model = ScriptedChatModel(steps=[[call("add", "c1", a=1, b=2), call("explode", "c2", reason="r")]])
    graph = agent_graph(model, ToolNode(to_langchain_tools(TOOLS, registry, executor, CONTEXT)))
    ok, failed = tool_messages(graph.invoke({"messages": [HumanMessage("go")]}))

    assert (ok.content, ok.status, ok.artifact.output) == ("3", "success", 3)
    assert failed.status == "error" and failed.content.startswith("Tool 'explode' failed (execution)")
    assert isinstance(failed.artifact, ToolResult) and failed.artifact.error_type == "execution"
    assert {(e.tool_call_id, e.agent_id) for e in log.events} == {("c1", "agent-7"), ("c2", "agent-7")}


async def test_stock_tool_node_in_an_async_graph_awaits_the_executor(registry, executor, log):
    model = ScriptedChatModel(steps=[[call("shout", "c1", text="hey")]])
    graph = agent_graph(model, ToolNode(to_langchain_tools(["shout"], registry, executor)))
    (message,) = tool_messages(await graph.ainvoke({"messages": [HumanMessage("go")]}))
    assert message.content == "HEY" and log.of_type("tool.completed")[0].tool_call_id == "c1"


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")
def test_our_tools_work_in_langgraphs_prebuilt_react_agent(registry, executor, log):
    model = ScriptedChatModel(steps=[[call("lookup", "c1", query="q", mode=None)], "All done."])
    agent = create_react_agent(model, to_langchain_tools(["lookup", "add"], registry, executor, CONTEXT))
    result = agent.invoke({"messages": [HumanMessage("go")]})

    assert model.bound_tools == ["lookup", "add"]
    assert result["messages"][-1].content == "All done."
    assert log.of_type("tool.completed")[0].output == {"query": "q", "options": {"region": "eu"}}


def test_direct_calls_return_text_and_failures_are_handled_tool_errors(registry, executor):
    add = to_langchain_tool(registry.require("add"), executor)
    assert add.invoke({"a": 1, "b": 2}) == "3"
    assert add.invoke({"a": 1, "b": "x"}).startswith("Tool 'add' failed (validation)")
    message = add.invoke({"name": "add", "args": {"a": 2, "b": 2}, "id": "c9", "type": "tool_call"})
    assert (message.content, message.artifact.output, message.tool_call_id) == ("4", 4, "c9")


def test_langchain_tool_exposes_the_json_schema_and_maps_back_to_the_tool(registry, executor):
    tool = to_langchain_tool(
        registry.require("lookup"), executor, binding={"fixed": {"limit": 1}, "description": "D"}
    )
    assert tool.name == "lookup" and tool.description == "D"
    assert tool.metadata == {"tool_id": "tool_lookup", "tool_type": "local"}
    assert set(tool.args_schema["properties"]) == {"query", "tags", "mode", "region"}
    assert tool.response_format == "content_and_artifact"


def test_a_node_without_refs_resolves_any_catalogue_tool_by_name(registry, executor):
    node = ExecutorToolNode(registry, executor)
    added, unknown = node.invoke(
        [AIMessage("", tool_calls=[call("Add", "c1", a=1, b=1), call("ghost", "c2")])]
    )
    assert (added.content, added.status) == ("2", "success")
    assert unknown.status == "error" and "lookup" in unknown.content
