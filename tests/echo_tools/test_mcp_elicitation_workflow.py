"""Elicitation inside a compiled workflow: a CrewAI agent's MCP tool asks for input, the run pauses with a
LangGraph interrupt carrying the server's schema, and `Command(resume=answer)` runs the node again with
the person's answer reaching the server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langgraph.types import Command

from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.mcp.callbacks import elicitation_handler
from tests.workflow_bridge._compiler_support import agent, chain, run
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.llm_rehearsal import RehearsalLLM


def contact_answers(log) -> list[dict]:
    done = [e for e in log.events if e.type == "tool.completed" and e.tool_id == "mcp_asking_ask_contact"]
    return [json.loads(e.output["result"]) for e in done]


def compiled(asking: tuple[ToolRegistry, ToolExecutor, MemoryEventLog]) -> tuple[Any, MemoryEventLog]:
    registry, executor, log = asking
    wf, agents = chain(
        agent("clerk", tools=["asking_ask_contact"]), agent("end", "End", output_schema=["result"])
    )
    graph = WorkflowCompiler(registry, executor, llm=RehearsalLLM()).compile(wf, agents)
    return graph, log


def test_the_run_pauses_with_the_servers_schema_and_resumes_with_the_answer(asking):
    graph, log = compiled(asking)
    paused = run(graph, "register me", run_id="run_elicit")
    (pause,) = paused["__interrupt__"]
    request = pause.value
    assert request["type"] == "mcp_elicitation" and request["mode"] == "form"
    assert request["server"] == "asking" and request["tool"] == "mcp_asking_ask_contact"
    assert request["message"] == "Who are you?"
    assert request["schema"]["required"] == ["name"]
    assert "result" not in paused
    assert contact_answers(log) == []  # the paused call has no closing event: it runs again on resume

    answer = {"action": "accept", "content": {"name": "Ada", "age": 36}}
    final = graph.invoke(Command(resume=answer), {"configurable": {"thread_id": "run_elicit"}})
    assert contact_answers(log) == [answer]
    assert '"name": "Ada"' in final["result"] or "Ada" in final["crew_result"]
    outcomes = [e.metadata["outcome"] for e in log.events if e.type == "tool.elicitation"]
    assert outcomes == ["interrupted", "accept"]


def test_a_resume_not_matching_the_schema_reaches_the_server_as_an_error_naming_the_field(asking):
    graph, log = compiled(asking)
    run(graph, "register me", run_id="run_bad")
    bad = {"action": "accept", "content": {"name": 42}}
    graph.invoke(Command(resume=bad), {"configurable": {"thread_id": "run_bad"}})
    (answer,) = contact_answers(log)
    assert 'content.name: 42 is not of type "string"' in answer["error"]


def test_a_hosts_handler_answers_without_pausing_the_run(asking):
    graph, log = compiled(asking)
    with elicitation_handler(lambda request: {"action": "decline"}):
        final = run(graph, "register me", run_id="run_handler")
    assert "__interrupt__" not in final
    assert contact_answers(log) == [{"action": "decline"}]


@pytest.mark.parametrize("asynchronous", [False, True])
async def test_a_langgraph_tool_node_pauses_and_resumes_too(asking, asynchronous):
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph

    from workflow_bridge.langgraph_tools import make_tool_node

    registry, executor, _ = asking
    builder = StateGraph(MessagesState)
    builder.add_node("tools", make_tool_node(registry, executor, ["mcp_asking_ask_contact"]))
    builder.add_edge(START, "tools")
    graph = builder.compile(checkpointer=InMemorySaver())
    call = {"name": "asking_ask_contact", "args": {}, "id": "call_1", "type": "tool_call"}
    config = {"configurable": {"thread_id": "t1"}}
    start = {"messages": [AIMessage(content="", tool_calls=[call])]}
    resume = Command(resume={"action": "accept", "content": {"name": "Lin"}})
    if asynchronous:
        paused = await graph.ainvoke(start, config)
        final = await graph.ainvoke(resume, config)
    else:
        paused = await asyncio.to_thread(graph.invoke, start, config)
        final = await asyncio.to_thread(graph.invoke, resume, config)
    assert paused["__interrupt__"][0].value["schema"]["required"] == ["name"]
    assert json.loads(json.loads(final["messages"][-1].content)["result"])["content"] == {"name": "Lin"}


def test_a_node_that_cannot_pause_gets_a_decline_not_a_crash(asking):
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, StateGraph
    from typing_extensions import TypedDict

    class State(TypedDict, total=False):
        answer: dict

    _, executor, _ = asking

    def plain(state: State) -> State:  # calls the executor itself, without graph_pauses()
        return {"answer": executor.invoke_sync("mcp_asking_ask_contact", {}).output}

    builder = StateGraph(State)
    builder.add_node("plain", plain)
    builder.add_edge(START, "plain")
    graph = builder.compile(checkpointer=InMemorySaver())
    final = graph.invoke({}, {"configurable": {"thread_id": "t2"}})
    assert "__interrupt__" not in final
    assert json.loads(final["answer"]["result"])["action"] == "decline"
