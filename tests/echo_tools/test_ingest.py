"""Ingestion: functions, LangChain tools and CrewAI tools join the catalogue and run through the executor."""

from __future__ import annotations

import typing
import warnings

import pytest

# the fixture module imports crewai, whose own import trips an ImportWarning that filterwarnings=error
# would turn into a collection error
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from echo_tools.errors import ToolRegistrationError
    from echo_tools.events import MemoryEventLog
    from echo_tools.executor import ToolExecutor
    from echo_tools.ingest import (
        parse_docstring,
        tool,
        tool_from_crewai,
        tool_from_function,
        tool_from_langchain,
    )
    from echo_tools.models import ToolType
    from echo_tools.registry import ToolRegistry
    from tests.workflow_bridge.fixture_tools import ingested

ALLOWED = ["tests.workflow_bridge.fixture_tools"]


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(allowed_modules=ALLOWED)


@pytest.fixture
def log() -> MemoryEventLog:
    return MemoryEventLog()


@pytest.fixture
def executor(registry: ToolRegistry, log: MemoryEventLog) -> typing.Iterator[ToolExecutor]:
    executor = ToolExecutor(registry, [log])
    yield executor
    executor.close()


def test_function_hints_and_google_docstring_become_the_input_schema():
    definition = tool_from_function(ingested.convert)
    assert definition.name == "convert" and definition.tool_id == "tool_convert"
    assert definition.tool_type is ToolType.LOCAL
    assert definition.description.startswith("Convert an amount into a currency.")
    assert "Args:" not in definition.description
    assert definition.execution_config == {"module": ingested.__name__, "function": "convert"}
    schema = definition.input_schema
    assert schema["required"] == ["amount"]
    assert schema["properties"]["amount"] == {"type": "number", "description": "How much to convert."}
    assert schema["properties"]["currency"] == {
        "type": "string",
        "enum": ["EUR", "USD"],
        "default": "EUR",
        "description": "The target currency, written as an ISO code.",
    }
    assert schema["properties"]["note"]["anyOf"] == [{"type": "string"}, {"type": "null"}]


def test_an_ingested_function_registers_and_runs_through_the_executor(registry, executor, log):
    registry.register(tool_from_function(ingested.convert, name="Currency Convert", tags=["money"]))
    result = executor.invoke_sync("currency_convert", {"amount": 2, "currency": "USD"})
    assert result.success and result.output == {"amount": 3.0, "currency": "USD"}
    assert executor.invoke_sync("currency_convert", {"amount": "two"}).error_type == "validation"
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed", "tool.failed"]


def test_the_decorator_attaches_the_definition_and_registers_it(registry, executor):
    decorated = tool(registry=registry, name="Greeter", side_effect="pure")(ingested.greet)
    assert decorated is ingested.greet and decorated.tool_def.name == "Greeter"
    assert registry.require("greeter").side_effect.value == "pure"
    assert executor.invoke_sync("greeter", {"name": "Ada", "excited": True}).output == "Hello, Ada!"


def test_the_bare_decorator_builds_without_registering():
    def sample(x: int) -> int:
        return x

    sample.__qualname__ = "sample"  # as if defined at module level
    assert tool(sample).tool_def.input_schema["properties"] == {"x": {"type": "integer"}}


def test_registration_outside_the_allowed_modules_is_refused_naming_the_module():
    strict = ToolRegistry(allowed_modules=["AgentTools"])
    with pytest.raises(ToolRegistrationError, match="'tests.workflow_bridge.fixture_tools.ingested'"):
        strict.register(tool_from_function(ingested.convert))


@pytest.mark.parametrize("target", [ingested.Nested().method, lambda x: x])
def test_methods_and_lambdas_are_refused_with_the_reason(target):
    with pytest.raises(ValueError, match="module-level function"):
        tool_from_function(target)


def test_docstring_parsing_handles_types_and_continuations():
    summary, args = parse_docstring(
        """Do things.

        Args:
            first (int): One.
            second: Two,
                continued.

        Raises:
            ValueError: never an argument.
        """
    )
    assert summary == "Do things."
    assert args == {"first": "One.", "second": "Two, continued."}


def test_a_langchain_tool_class_joins_the_catalogue_and_runs(registry, executor, log):
    definition = tool_from_langchain(ingested.WordCountTool)
    assert definition.tool_type is ToolType.LANGCHAIN and definition.name == "word_count"
    assert definition.execution_config == {"module": ingested.__name__, "class": "WordCountTool"}
    assert definition.input_schema["properties"]["minimum"] == {
        "type": "integer",
        "default": 1,
        "description": "Only count words at least this long",
    }
    registry.register(definition)
    assert executor.invoke_sync("word_count", {"text": "a bb ccc", "minimum": 2}).output == 2
    assert log.of_type("tool.completed")[0].tool_type == "langchain"


def test_a_langchain_structured_tool_needs_a_factory_and_runs_from_one(registry, executor):
    with pytest.raises(ValueError, match="'reverse' is a StructuredTool built with constructor arguments"):
        tool_from_langchain(ingested.make_reverse_tool())
    definition = tool_from_langchain(ingested.make_reverse_tool, tags=["text"])
    assert definition.execution_config == {"module": ingested.__name__, "factory": "make_reverse_tool"}
    registry.register(definition)
    assert executor.invoke_sync("reverse", {"text": "abc"}).output == "cba"


def test_a_crewai_tool_instance_joins_the_catalogue_and_runs(registry, executor):
    definition = tool_from_crewai(ingested.RepeatTool(), name="Repeat")
    assert definition.tool_type is ToolType.CREWAI
    assert definition.execution_config == {"module": ingested.__name__, "class": "RepeatTool"}
    assert definition.description == "Repeat a word a few times."
    assert definition.input_schema["properties"]["times"]["maximum"] == 5
    registry.register(definition)
    assert executor.invoke_sync("repeat", {"word": "hi", "times": 3}).output == "hi hi hi"
    assert executor.invoke_sync("repeat", {"word": "hi", "times": 9}).error.startswith(
        "Tool 'tool_repeat': invalid input: input.times"
    )


def test_things_that_are_not_framework_tools_are_refused_by_type():
    with pytest.raises(TypeError, match="not a LangChain BaseTool subclass"):
        tool_from_langchain(ingested.RepeatInput)
    with pytest.raises(TypeError, match="Expected a CrewAI BaseTool"):
        tool_from_crewai("repeat")
