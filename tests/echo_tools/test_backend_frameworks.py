"""The `crewai` and `langchain` backends, running tiny real framework tool classes inside the executor."""

from __future__ import annotations

import pytest

from echo_tools import ToolContext
from tests.echo_tools._executor_support import FIXTURES, make_executor

# CrewAI's own import raises this ImportWarning (crewai/memory/unified_memory.py importing crewai.rag)
pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

MODULE = f"{FIXTURES}.frameworks"
WORDS = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "minimum": {"type": "integer"}},
    "required": ["text"],
}


def framework_tool(name: str, tool_type: str, **config: str) -> dict:
    return {
        "name": name,
        "tool_type": tool_type,
        "input_schema": WORDS,
        "execution_config": {"module": MODULE, **config},
    }


def test_a_crewai_tool_runs_through_the_executor_with_events() -> None:
    executor, log = make_executor(framework_tool("counter", "crewai", **{"class": "CrewWordCounter"}))
    result = executor.invoke_sync("counter", {"text": "a bb ccc", "minimum": 2}, ToolContext(run_id="r"))
    assert result.success and result.output == "2 words"
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed"]
    assert log.events[0].tool_type == "crewai" and log.events[1].run_id == "r"


def test_a_crewai_tool_with_arun_is_awaited() -> None:
    executor, _ = make_executor(framework_tool("upper", "crewai", **{"class": "CrewAsyncUpper"}))
    assert executor.invoke_sync("upper", {"text": "tea"}).output == "TEA"


def test_crewai_none_for_optional_fields_is_dropped_before_the_tool_sees_it() -> None:
    executor, _ = make_executor(framework_tool("counter", "crewai", **{"class": "CrewWordCounter"}))
    assert executor.invoke_sync("counter", {"text": "a bb", "minimum": None}).output == "2 words"


def test_a_crewai_usage_limit_becomes_an_execution_failure() -> None:
    executor, _ = make_executor(framework_tool("limited", "crewai", **{"class": "CrewLimited"}))
    assert executor.invoke_sync("limited", {"text": "x"}).success
    second = executor.invoke_sync("limited", {"text": "x"})
    assert second.error_type == "execution" and "usage limit" in second.error


def test_a_crewai_exception_is_an_execution_failure_naming_it() -> None:
    executor, log = make_executor(framework_tool("broken", "crewai", **{"class": "CrewBroken"}))
    result = executor.invoke_sync("broken", {"text": "soup"})
    assert result.error_type == "execution" and "RuntimeError" in result.error and "'soup'" in result.error
    assert log.events[-1].type == "tool.failed"


def test_a_class_that_is_not_a_crewai_tool_is_refused() -> None:
    executor, _ = make_executor(framework_tool("wrong", "crewai", **{"class": "LCWordCounter"}))
    result = executor.invoke_sync("wrong", {"text": "x"})
    assert result.error_type == "execution" and "not a crewai.tools.BaseTool" in result.error


async def test_a_langchain_tool_class_is_awaited_through_ainvoke() -> None:
    executor, log = make_executor(framework_tool("lc counter", "langchain", **{"class": "LCWordCounter"}))
    result = await executor.invoke("lc counter", {"text": "one two three"})
    assert result.output == {"words": 3}
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed"]


async def test_a_langchain_factory_tool_runs() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    tool = {
        "name": "multiply",
        "tool_type": "langchain",
        "input_schema": schema,
        "execution_config": {"module": MODULE, "factory": "make_lc_multiplier"},
    }
    executor, _ = make_executor(tool)
    assert (await executor.invoke("multiply", {"a": 6, "b": 7})).output == 42


async def test_a_langchain_tool_exception_is_an_execution_failure() -> None:
    tool = framework_tool("failing", "langchain", factory="make_lc_failing")
    executor, _ = make_executor(tool)
    result = await executor.invoke("failing", {"text": "tea"})
    assert result.error_type == "execution" and "no luck with tea" in result.error


async def test_a_sync_langchain_tool_runs_on_the_executors_worker_threads() -> None:
    executor, _ = make_executor(framework_tool("where", "langchain", factory="make_lc_thread_name"))
    result = await executor.invoke("where", {"text": "x"})
    assert result.output.startswith("echo-tools-worker")


async def test_an_async_langchain_tool_is_awaited_on_the_loop() -> None:
    executor, _ = make_executor(framework_tool("shout", "langchain", factory="make_lc_async"))
    assert (await executor.invoke("shout", {"text": "tea"})).output == "TEA"
