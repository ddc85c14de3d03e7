"""Tools bound on demand: an agent sees `search_tools`, searches a large catalogue, then calls what it
found, through the executor (LangGraph `ExecutorToolNode(search=True)`, CrewAI `to_crewai_tools(search=True)`)."""

from __future__ import annotations

import typing
import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from crewai import Agent, Crew, Task
    from langchain_core.messages import HumanMessage, ToolMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import tools_condition

    from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry
    from tests.workflow_bridge._fake_llms import FunctionCallingLLM, ScriptedChatModel
    from workflow_bridge import ExecutorToolNode, to_crewai_tools


def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


def large_catalogue() -> tuple[ToolRegistry, ToolExecutor, MemoryEventLog]:
    registry = ToolRegistry()
    for n in range(200):

        def filler(x: int, n: int = n) -> int:
            return x + n

        registry.add(
            filler, name=f"inventory_report_{n}", description=f"Report stock level {n} of a warehouse."
        )
    registry.add(celsius_to_fahrenheit)
    log = MemoryEventLog()
    return registry, ToolExecutor(registry, event_sinks=[log]), log


def test_a_langgraph_agent_binds_the_tools_it_found_on_demand():
    registry, executor, log = large_catalogue()
    node = ExecutorToolNode(registry, executor, search=True)
    seen: list[list[str]] = []

    def first(messages: typing.Any, tools: list[str]) -> list[dict[str, typing.Any]]:
        seen.append(tools)
        return [{"name": "search_tools", "args": {"query": "convert celsius temperature"}, "id": "s1"}]

    def second(messages: typing.Any, tools: list[str]) -> list[dict[str, typing.Any]]:
        seen.append(tools)
        return [{"name": "celsius_to_fahrenheit", "args": {"celsius": 100}, "id": "c1"}]

    model = ScriptedChatModel(steps=[first, second, "done"])

    def agent(state: MessagesState) -> dict[str, typing.Any]:
        return {"messages": [model.bind_tools(list(node)).invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "agent")
    final = builder.compile().invoke({"messages": [HumanMessage("100 C in F?")]})

    assert seen[0] == ["search_tools"]  # a handful out of 201: only the search tool at first
    assert "celsius_to_fahrenheit" in seen[1] and len(seen[1]) <= 7
    answers = {m.tool_call_id: m.content for m in final["messages"] if isinstance(m, ToolMessage)}
    assert answers["c1"] == "212.0"
    completed = [e.tool_id for e in log.events if e.type == "tool.completed"]
    assert completed == ["tool_search_tools", "tool_celsius_to_fahrenheit"]


def test_a_tool_not_found_by_search_is_not_callable_through_the_search_node():
    registry, executor, _ = large_catalogue()
    node = ExecutorToolNode(registry, executor, search=True)
    out = node.invoke({"messages": [_ai_call("celsius_to_fahrenheit", {"celsius": 1})]})
    (message,) = out["messages"]
    assert message.status == "error" and "not a valid tool" in message.content


def _ai_call(name: str, args: dict[str, typing.Any]) -> typing.Any:
    from langchain_core.messages import AIMessage

    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "x1"}])


def test_a_crewai_agent_searches_then_calls_the_tool_it_found():
    registry, executor, log = large_catalogue()
    tools = to_crewai_tools([], registry, executor, search=True)
    assert [t.name for t in tools] == ["search_tools", "call_tool"]
    llm = FunctionCallingLLM(
        [
            [
                {
                    "name": "call_tool",
                    "args": {"tool_name": "celsius_to_fahrenheit", "arguments": {"celsius": 0}},
                }
            ],
            [{"name": "search_tools", "args": {"query": "celsius to fahrenheit"}}],
            [
                {
                    "name": "call_tool",
                    "args": {"tool_name": "celsius_to_fahrenheit", "arguments": {"celsius": 0}},
                }
            ],
        ]
    )
    agent = Agent(
        role="Analyst", goal="Use the tools", backstory="Careful.", llm=llm, tools=tools, max_iter=6
    )
    Crew(
        agents=[agent], tasks=[Task(description="Convert.", expected_output="A number.", agent=agent)]
    ).kickoff()

    observations = llm.observations()
    assert "was not found by search_tools" in observations[0]
    assert "celsius_to_fahrenheit" in observations[1] and observations[2] == "32.0"
    completed = [e.tool_id for e in log.events if e.type == "tool.completed"]
    assert completed == ["tool_search_tools", "tool_celsius_to_fahrenheit"]
