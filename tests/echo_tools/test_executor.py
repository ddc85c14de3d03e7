"""The executor pipeline, step by step, with real local tools from tests/echo_tools/fixture_tools."""

from __future__ import annotations

import asyncio

import pytest

from echo_tools import ToolContext, ToolExecutor, ToolPermission
from echo_tools.errors import ToolOutputValidationError, ToolValidationError
from tests.echo_tools._executor_support import NUMBERS, local_tool, make_executor
from tests.echo_tools.fixture_tools import basic

ADD = local_tool("add", "add", input_schema=NUMBERS, output_schema={"type": "number"})


async def test_invoke_returns_the_output_of_a_sync_tool() -> None:
    executor, _ = make_executor(ADD)
    result = await executor.invoke("add", {"a": 2, "b": 3})
    assert result.success and result.output == 5 and result.attempts == 1
    assert result.tool_id == "tool_add" and result.name == "add"


def test_invoke_sync_returns_the_output_of_an_async_tool() -> None:
    executor, _ = make_executor(local_tool("async add", "async_add", input_schema=NUMBERS))
    assert executor.invoke_sync("async add", {"a": 1, "b": 1.5}).output == 2.5


def test_unknown_tool_is_a_not_found_result_with_one_failed_event() -> None:
    executor, log = make_executor(ADD)
    result = executor.invoke_sync("nope", {})
    assert not result.success and result.error_type == "not_found" and "'nope'" in result.error
    assert [e.type for e in log.events] == ["tool.failed"]
    with pytest.raises(Exception, match="nope"):
        result.raise_for_error()


def test_disabled_tool_is_refused_without_running() -> None:
    basic.COUNTERS.pop("disabled", None)
    executor, log = make_executor(local_tool("counter", "count_calls", status="disabled"))
    result = executor.invoke_sync("counter", {"key": "disabled"})
    assert result.error_type == "disabled"
    assert "disabled" not in basic.COUNTERS
    assert [e.type for e in log.events] == ["tool.failed"]


def test_permission_denied_does_not_run_the_tool() -> None:
    basic.COUNTERS.pop("perm", None)
    tool = local_tool("counter", "count_calls", permissions=["fs:write", "fs:read"])
    executor, log = make_executor(tool)
    context = ToolContext(granted_permissions=[ToolPermission.FS_READ], run_id="r1")
    result = executor.invoke_sync("counter", {"key": "perm"}, context)
    assert result.error_type == "permission_denied" and "fs:write" in result.error
    assert result.error_field == "permissions"
    assert "perm" not in basic.COUNTERS
    assert log.events[0].type == "tool.failed" and log.events[0].run_id == "r1"


def test_granted_permissions_and_unrestricted_context_both_run_the_tool() -> None:
    executor, _ = make_executor(local_tool("counter", "count_calls", permissions=["fs:read"]))
    granted = ToolContext(granted_permissions=["fs:read", "net:outbound"])
    assert executor.invoke_sync("counter", {"key": "granted"}, granted).success
    assert executor.invoke_sync("counter", {"key": "granted"}).success


def test_validation_error_names_the_path_and_the_value() -> None:
    executor, log = make_executor(ADD)
    result = executor.invoke_sync("add", {"a": 1, "b": "seven"})
    assert result.error_type == "validation"
    assert "input.b" in result.error and "seven" in result.error
    assert result.error_field == "input.b"  # as data: nobody parses it back out of the message
    assert [e.type for e in log.events] == ["tool.failed"]
    with pytest.raises(ToolValidationError):
        result.raise_for_error()


def test_non_object_input_is_a_validation_error_naming_the_value() -> None:
    executor, _ = make_executor(ADD)
    result = executor.invoke_sync("add", "1 + 2")  # type: ignore[arg-type]
    assert result.error_type == "validation" and "'1 + 2'" in result.error and result.error_field == "input"


def test_the_most_specific_field_is_named_when_several_are_wrong() -> None:
    executor, _ = make_executor(ADD)
    result = executor.invoke_sync("add", {"a": "1"})  # b missing (names only "input"), a of the wrong type
    assert result.error_type == "validation" and result.error_field == "input.a"


async def test_invoke_and_invoke_sync_give_the_same_result_for_every_outcome() -> None:
    executor, _ = make_executor(ADD, local_tool("boom", "boom"))
    for ref, args in (
        ("add", {"a": 1, "b": 2}),
        ("add", {"a": "x", "b": 2}),
        ("boom", {"message": "bad"}),
        ("nope", {}),
    ):
        awaited = await executor.invoke(ref, args)
        blocking = await asyncio.to_thread(executor.invoke_sync, ref, args)
        same = ("success", "output", "error", "error_type", "error_field", "attempts")
        assert {k: getattr(awaited, k) for k in same} == {k: getattr(blocking, k) for k in same}


def test_none_for_optional_fields_is_dropped_and_defaults_are_filled() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "limit": {"type": "integer", "default": 10},
            "word": {"type": "string"},
        },
        "required": ["word"],
    }
    executor, log = make_executor(local_tool("echo", "echo", input_schema=schema))
    result = executor.invoke_sync("echo", {"word": "hi", "tags": None})
    assert result.output == {"word": "hi", "limit": 10}
    assert log.events[0].input == {"word": "hi", "limit": 10}


@pytest.mark.parametrize(
    ("function", "args", "expected"),
    [
        ("as_list", {"n": 3}, [0, 1, 2]),
        ("as_text", {"word": "ab"}, "abab"),
        ("as_dataclass", {"x": 1, "y": 2}, {"x": 1, "y": 2}),
        ("as_model", {"text": "q"}, {"text": "q", "limit": 3}),
    ],
)
def test_outputs_become_json_values(function: str, args: dict, expected: object) -> None:
    executor, log = make_executor(local_tool("tool", function))
    result = executor.invoke_sync("tool", args)
    assert result.success and result.output == expected
    assert log.events[-1].output == expected


def test_output_not_matching_the_schema_is_an_output_validation_failure() -> None:
    schema = {"type": "object", "properties": {"value": {"type": "integer"}}}
    executor, log = make_executor(local_tool("wrong", "wrong_output", output_schema=schema))
    result = executor.invoke_sync("wrong", {"n": 4})
    assert (
        result.error_type == "output_validation" and "output.value" in result.error and '"4"' in result.error
    )
    assert log.events[-1].type == "tool.failed" and log.events[-1].error_type == "output_validation"
    with pytest.raises(ToolOutputValidationError):
        result.raise_for_error()


def test_output_validation_in_warn_mode_keeps_the_call_successful() -> None:
    schema = {"type": "object", "properties": {"value": {"type": "integer"}}}
    tool = local_tool("wrong", "wrong_output", output_schema=schema)
    executor, log = make_executor(tool, output_validation="warn")
    result = executor.invoke_sync("wrong", {"n": 4})
    assert result.success and result.output == {"value": "4"}
    assert "output.value" in result.metadata["output_warnings"][0]
    assert log.events[-1].type == "tool.completed"


def test_output_validation_mode_must_be_known() -> None:
    executor, _ = make_executor()
    with pytest.raises(ValueError, match="'loud'"):
        ToolExecutor(executor.registry, output_validation="loud")


def test_tool_exception_is_an_execution_failure_naming_the_exception() -> None:
    executor, log = make_executor(local_tool("boom", "boom"))
    result = executor.invoke_sync("boom", {"message": "disk on fire"})
    assert result.error_type == "execution"
    assert "ValueError" in result.error and "disk on fire" in result.error
    assert [e.type for e in log.events] == ["tool.invoked", "tool.failed"]


async def test_invoke_sync_inside_a_running_loop_raises() -> None:
    executor, _ = make_executor(ADD)
    with pytest.raises(RuntimeError, match="await executor.invoke"):
        executor.invoke_sync("add", {"a": 1, "b": 2})


async def test_many_concurrent_invokes_all_succeed() -> None:
    executor, log = make_executor(local_tool("async add", "async_add", input_schema=NUMBERS))
    results = await asyncio.gather(*(executor.invoke("async add", {"a": i, "b": 1}) for i in range(200)))
    assert [r.output for r in results] == [i + 1 for i in range(200)]
    assert len(log.of_type("tool.completed")) == 200
    assert executor.metrics()["tool_async_add"]["calls"] == 200


def test_results_behave_as_ordinary_validated_tool_results() -> None:
    from echo_tools import ToolResult

    executor, _ = make_executor(ADD)
    result = executor.invoke_sync("add", {"a": 2, "b": 3})
    dumped = result.model_dump()
    assert dumped["output"] == 5 and dumped["success"] is True and dumped["attempts"] == 1
    assert ToolResult.model_validate(dumped) == result
    assert ToolResult.model_validate_json(result.model_dump_json()) == result
    result.metadata["note"] = "callers may annotate results"
    copy = result.model_copy(update={"output": 6})
    assert copy.output == 6 and result.output == 5 and result.raise_for_error() is result


def test_events_behave_as_ordinary_tool_events() -> None:
    import dataclasses

    executor, log = make_executor(ADD)
    executor.invoke_sync("add", {"a": 2, "b": 3})
    event = log.events[-1]
    as_dict = dataclasses.asdict(event)
    assert as_dict["output"] == 5 and as_dict["error"] is None and len(as_dict["event_id"]) == 32
    assert dataclasses.replace(event, output=6).output == 6
    assert event == dataclasses.replace(event) and "tool.completed" in repr(event)


def test_non_json_outputs_become_json_values() -> None:
    schema = {"type": "object", "properties": {"when": {"type": "string"}, "price": {"type": "number"}}}
    executor, _ = make_executor(local_tool("odd", "odd_values", output_schema=schema))
    result = executor.invoke_sync("odd", {})
    assert result.success, result.error
    assert result.output == {
        "when": "2026-01-02",
        "tags": ["only"],
        "colour": "red",
        "raw": "bytes",
        "price": 1.5,
        "where": "/tmp/x",
    }


def test_input_values_that_are_not_json_are_a_validation_error_naming_the_type() -> None:
    schema = {"type": "object", "properties": {"word": {"type": "string"}}}
    executor, _ = make_executor(local_tool("echo", "echo", input_schema=schema))
    result = executor.invoke_sync("echo", {"word": b"raw"})
    assert result.error_type == "validation" and "bytes" in result.error


def test_none_for_an_optional_field_without_defaults_is_dropped_unless_the_field_allows_null() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}},
            "note": {"type": ["string", "null"]},
            "word": {"type": "string"},
        },
        "required": ["word"],
    }
    executor, log = make_executor(
        local_tool("echo", "echo", input_schema=schema, config={"isolation": "inline"})
    )
    result = executor.invoke_sync("echo", {"word": "hi", "tags": None, "note": None})
    assert result.output == {"word": "hi", "note": None} == log.events[0].input
    refused = executor.invoke_sync("echo", {"word": None, "tags": None})
    assert refused.error_type == "validation" and "input.word: null is not" in refused.error


def test_a_name_called_before_follows_the_registry_when_the_tool_is_renamed_replaced_or_deleted() -> None:
    executor, _ = make_executor({**ADD, "tool_id": "calc"})
    registry = executor.registry
    assert executor.invoke_sync("add", {"a": 1, "b": 2}).output == 3
    registry.register(local_tool("add", "echo", tool_id="calc", input_schema=NUMBERS))
    assert executor.invoke_sync("add", {"a": 1, "b": 2}).output == {"a": 1, "b": 2}  # the new definition
    registry.register(local_tool("plus", "add", tool_id="calc", input_schema=NUMBERS))
    gone = executor.invoke_sync("add", {"a": 1, "b": 2})
    assert registry.resolve("add") is None
    assert gone.error_type == "not_found" and "'add'" in gone.error
    assert executor.invoke_sync("plus", {"a": 1, "b": 2}).output == 3
    registry.delete("calc")
    assert executor.invoke_sync("plus", {"a": 1, "b": 2}).error_type == "not_found"
