"""`tool_from_crewai` accepts functions decorated with CrewAI's own `@tool` (issue 17): they join the
catalogue, run through the executor and bind to a real CrewAI agent."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():  # crewai's import trips an ImportWarning that filterwarnings=error rejects
    warnings.simplefilter("ignore", ImportWarning)
    from echo_tools.events import MemoryEventLog
    from echo_tools.executor import ToolExecutor
    from echo_tools.ingest import tool_from_crewai
    from echo_tools.models import ToolType
    from echo_tools.registry import ToolRegistry
    from tests.workflow_bridge.fixture_tools import crewai_decorated

MODULE = "tests.workflow_bridge.fixture_tools.crewai_decorated"


@pytest.fixture
def registry():
    return ToolRegistry(allowed_modules=[MODULE])


def test_a_crewai_tool_decorated_function_becomes_a_tool_with_the_decorators_name(registry):
    definition = tool_from_crewai(crewai_decorated.word_count)
    assert definition.tool_type is ToolType.LOCAL
    assert definition.execution_config == {"module": MODULE, "function": "word_count"}
    assert definition.name == "Word Count" and "crewai" in definition.tags
    assert "Count the words" in definition.description
    assert definition.input_schema["properties"]["minimum_length"]["default"] == 1
    assert definition.input_schema["required"] == ["text"]


def test_it_runs_through_the_executor_with_events(registry):
    registry.register(tool_from_crewai(crewai_decorated.word_count))
    registry.register(tool_from_crewai(crewai_decorated.shout, tags=["text"]))
    log = MemoryEventLog()
    executor = ToolExecutor(registry, [log])
    try:
        counted = executor.invoke_sync("Word Count", {"text": "a bb ccc", "minimum_length": 2})
        shouted = executor.invoke_sync("shout", {"text": "hi"})
    finally:
        executor.close()
    assert (counted.success, counted.output) == (True, 2), counted.error
    assert (shouted.output, registry.get(shouted.tool_id).tags) == ("HI", ["text", "crewai", "source:python"])
    assert [e.type for e in log.events if e.type.startswith("tool.")].count("tool.completed") == 2


def test_it_binds_to_a_crewai_agent_that_calls_it(registry):
    from crewai import Agent, Crew, Task

    from tests.workflow_bridge._fake_llms import FunctionCallingLLM
    from workflow_bridge.crewai_tools import to_crewai_tool

    registry.register(tool_from_crewai(crewai_decorated.word_count))
    executor = ToolExecutor(registry)
    llm = FunctionCallingLLM([[{"name": "word_count", "args": {"text": "one two three"}}]])
    try:
        bound = to_crewai_tool(registry.resolve("Word Count"), executor)
        agent = Agent(role="Counter", goal="count", backstory="counts", tools=[bound], llm=llm)
        crew = Crew(agents=[agent], tasks=[Task(description="count", expected_output="n", agent=agent)])
        output = crew.kickoff()
    finally:
        executor.close()
    assert "3" in llm.observations()[0] and "3" in str(output)


def test_a_tool_made_by_calling_the_decorator_runs_the_module_function(registry):
    definition = tool_from_crewai(crewai_decorated.renamed)
    assert (definition.name, definition.execution_config["function"]) == ("Renamed", "plain_text")
    registry.register(definition)
    executor = ToolExecutor(registry)
    try:
        assert executor.invoke_sync("Renamed", {"text": "as is"}).output == "as is"
    finally:
        executor.close()


def test_a_decorated_function_not_reachable_from_its_module_is_refused_naming_it():
    with pytest.raises(ValueError, match="'Nested'.*_make_nested.<locals>.nested.*not reachable"):
        tool_from_crewai(crewai_decorated.nested_tool)


def test_the_executor_refuses_a_decorated_function_outside_the_allowed_modules():
    registry = ToolRegistry(allowed_modules=["AgentTools"])
    definition = tool_from_crewai(crewai_decorated.word_count)
    with pytest.raises(Exception, match="allowed modules"):
        registry.register(definition)
