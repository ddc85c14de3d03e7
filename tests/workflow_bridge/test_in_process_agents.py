"""In-process tools (`ToolRegistry.add`) in a LangChain `create_agent` graph and a CrewAI agent: a function
of this module, a closure and a framework tool instance, every call through the executor."""

from __future__ import annotations

import typing
import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from crewai import Agent, Crew, Task
    from crewai.tools import BaseTool as CrewBaseTool
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import StructuredTool

    from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry
    from tests.workflow_bridge._fake_llms import FunctionCallingLLM, ScriptedChatModel
    from workflow_bridge import to_crewai_tools, to_langchain_tools


def area(width: float, height: float) -> float:
    """The area of a rectangle.

    Args:
        width: the width.
        height: the height.
    """
    return width * height


def scaled_by(factor: int) -> typing.Callable[[int], int]:
    def scale(value: int) -> int:
        """Multiply a value by the configured factor."""
        return value * factor

    return scale


class WordCount(CrewBaseTool):
    name: str = "word_count"
    description: str = "Count the words of a text."

    def _run(self, text: str) -> int:
        return len(text.split())


def catalogue(tmp_path: typing.Any) -> tuple[ToolRegistry, ToolExecutor, MemoryEventLog]:
    registry = ToolRegistry(storage_dir=tmp_path / "tools")
    log = MemoryEventLog()
    return registry, ToolExecutor(registry, event_sinks=[log]), log


def test_a_create_agent_graph_calls_a_module_function_a_closure_and_a_langchain_tool(tmp_path):
    registry, executor, log = catalogue(tmp_path)
    registry.add(area)
    registry.add(scaled_by(3))
    registry.add(
        StructuredTool.from_function(lambda text: text[::-1], name="reverse", description="Reverse.")
    )
    calls = [
        {"name": "area", "args": {"width": 2, "height": 5}, "id": "c1"},
        {"name": "scale", "args": {"value": 7}, "id": "c2"},
        {"name": "reverse", "args": {"text": "abc"}, "id": "c3"},
    ]
    model = ScriptedChatModel(steps=[calls, "done"])
    agent = create_agent(model, tools=to_langchain_tools(["area", "scale", "reverse"], registry, executor))
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom", "values"]))

    final = [c for mode, c in chunks if mode == "values"][-1]
    results = {m.tool_call_id: m.content for m in final["messages"] if isinstance(m, ToolMessage)}
    assert results == {"c1": "10", "c2": "21", "c3": "cba"}
    streamed = sorted((c["type"], c["tool_call_id"]) for mode, c in chunks if mode == "custom")
    assert streamed == sorted((t, c) for t in ("tool.invoked", "tool.completed") for c in ("c1", "c2", "c3"))
    completed = sorted(e.tool_id for e in log.events if e.type == "tool.completed")
    assert completed == ["tool_area", "tool_reverse", "tool_scale"]


def test_a_crewai_agent_calls_a_module_function_a_closure_and_a_crewai_tool(tmp_path):
    registry, executor, log = catalogue(tmp_path)
    registry.add(area)
    registry.add(scaled_by(10))
    registry.add(WordCount())
    llm = FunctionCallingLLM(
        [
            [{"name": "area", "args": {"width": 3, "height": 4}}],
            [{"name": "scale", "args": {"value": 2}}],
            [{"name": "word_count", "args": {"text": "one two three"}}],
        ]
    )
    tools = to_crewai_tools(["area", "scale", "word_count"], registry, executor)
    agent = Agent(
        role="Analyst", goal="Use the tools", backstory="Careful.", llm=llm, tools=tools, max_iter=6
    )
    task = Task(description="Use the tools.", expected_output="A short report.", agent=agent)
    Crew(agents=[agent], tasks=[task]).kickoff()

    assert llm.observations() == ["12", "20", "3"]
    assert [(e.type, e.tool_id) for e in log.events] == [
        (kind, tool_id)
        for tool_id in ("tool_area", "tool_scale", "tool_word_count")
        for kind in ("tool.invoked", "tool.completed")
    ]


def test_a_streaming_tools_chunks_reach_the_langgraph_custom_stream(tmp_path):
    registry, executor, log = catalogue(tmp_path)

    def spell(word: str):
        """Spell a word, letter by letter."""
        yield from word

    registry.add(spell)
    model = ScriptedChatModel(steps=[[{"name": "spell", "args": {"word": "abc"}, "id": "c1"}], "done"])
    agent = create_agent(model, tools=to_langchain_tools(["spell"], registry, executor))
    chunks = list(agent.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom", "values"]))

    custom = [(c["type"], c.get("output")) for mode, c in chunks if mode == "custom"]
    assert custom == [
        ("tool.invoked", None),
        ("tool.output.delta", "a"),
        ("tool.output.delta", "b"),
        ("tool.output.delta", "c"),
        ("tool.completed", "abc"),
    ]
    final = [c for mode, c in chunks if mode == "values"][-1]
    assert [m.content for m in final["messages"] if isinstance(m, ToolMessage)] == ["abc"]
