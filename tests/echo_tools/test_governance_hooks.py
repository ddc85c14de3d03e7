"""Hooks run inside the executor's one pipeline: after validation and before the tool, after the output
check; Deny and Replace; a hook that raises fails the call closed, named."""

from __future__ import annotations

import re
from typing import Any

import pytest

from echo_tools import ToolResult
from echo_tools.governance import Deny, Replace, ToolCall

from ._executor_support import NUMBERS, local_tool, make_executor

ADD = local_tool("Add", "add", input_schema=NUMBERS, side_effect="pure")
WORD = local_tool(
    "Say",
    "as_text",
    input_schema={"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]},
)
COUNT = local_tool(
    "Count", "count_calls", input_schema={"type": "object", "properties": {"key": {"type": "string"}}}
)


class Guardrail:
    """Denies a call whose `word` matches a pattern."""

    name = "no-secrets"

    def __init__(self, pattern: str) -> None:
        self.pattern = re.compile(pattern)
        self.seen: list[dict[str, Any]] = []

    def before(self, call: ToolCall) -> Deny | None:
        self.seen.append(dict(call.args))
        if any(isinstance(v, str) and self.pattern.search(v) for v in call.args.values()):
            return Deny(f"argument matches {self.pattern.pattern!r}")
        return None


def test_a_deny_stops_the_call_before_the_tool_runs_and_names_the_hook() -> None:
    executor, log = make_executor(COUNT)
    executor.add_hook(Guardrail(r"^secret"))
    denied = executor.invoke_sync("Count", {"key": "secret-key"})
    assert denied.success is False
    assert denied.error_type == "denied"
    assert "no-secrets" in (denied.error or "") and "^secret" in (denied.error or "")
    assert denied.metadata["hook"] == "no-secrets"
    assert [e.type for e in log.events] == ["tool.failed"]  # no tool.invoked: it never ran
    allowed = executor.invoke_sync("Count", {"key": "gov-deny-test"})
    assert allowed.success and allowed.output == 1  # the denied call was not counted by the tool


def test_hooks_see_validated_arguments_with_defaults_filled() -> None:
    schema = {"type": "object", "properties": {"word": {"type": "string", "default": "hi"}}}
    executor, _ = make_executor(local_tool("Say", "as_text", input_schema=schema))
    guard = Guardrail("x")
    executor.add_hook(guard)
    assert executor.invoke_sync("Say", {}).success
    assert guard.seen == [{"word": "hi"}]
    bad = executor.invoke_sync("Say", {"word": 3})
    assert bad.error_type == "validation"
    assert guard.seen == [{"word": "hi"}]  # an invalid call never reaches the hooks


def test_replace_changes_the_arguments_and_they_are_validated_again() -> None:
    class Double:
        def before(self, call: ToolCall) -> Replace:
            return Replace({"a": call.args["a"] * 2, "b": call.args["b"]})

    executor, log = make_executor(ADD)
    executor.add_hook(Double())
    result = executor.invoke_sync("Add", {"a": 2, "b": 1})
    assert result.output == 5
    invoked = next(e for e in log.events if e.type == "tool.invoked")
    assert invoked.input == {"a": 4, "b": 1}  # the event records what ran

    class Breaks:
        name = "breaker"

        def before(self, call: ToolCall) -> Replace:
            return Replace({"a": "two", "b": 1})

    executor.add_hook(Breaks())
    broken = executor.invoke_sync("Add", {"a": 2, "b": 1})
    assert broken.error_type == "validation"
    assert broken.error_field == "input.a"
    assert "breaker" in (broken.error or "")


def test_hooks_run_in_order_and_a_later_one_sees_the_earlier_replacement() -> None:
    order: list[str] = []

    class Step:
        def __init__(self, name: str, add: int) -> None:
            self.name, self.add = name, add

        def before(self, call: ToolCall) -> Replace:
            order.append(f"{self.name}:{call.args['a']}")
            return Replace({**call.args, "a": call.args["a"] + self.add})

        def after(self, call: ToolCall, result: ToolResult) -> None:
            order.append(f"after-{self.name}")

    executor, _ = make_executor(ADD)
    executor.add_hook(Step("first", 10))
    executor.add_hook(Step("second", 100))
    assert executor.invoke_sync("Add", {"a": 1, "b": 0}).output == 111
    assert order == ["first:1", "second:11", "after-first", "after-second"]


def test_a_hook_that_raises_fails_the_call_closed_naming_the_hook() -> None:
    class Broken:
        name = "policy-service"

        def before(self, call: ToolCall) -> None:
            raise ConnectionError("policy server down")

    executor, log = make_executor(COUNT)
    executor.add_hook(Broken())
    result = executor.invoke_sync("Count", {"key": "gov-raise-test"})
    assert result.success is False and result.error_type == "denied"
    assert "policy-service" in (result.error or "") and "ConnectionError" in (result.error or "")
    assert not any(e.type == "tool.invoked" for e in log.events)


def test_after_may_replace_the_result_and_a_raising_after_withholds_it() -> None:
    class Redact:
        def after(self, call: ToolCall, result: ToolResult) -> ToolResult:
            return result.model_copy(update={"output": "[redacted]"})

    executor, _ = make_executor(WORD)
    executor.add_hook(Redact())
    assert executor.invoke_sync("Say", {"word": "password"}).output == "[redacted]"

    class Crashes:
        name = "auditor"

        def after(self, call: ToolCall, result: ToolResult) -> None:
            raise RuntimeError("audit log full")

    executor.add_hook(Crashes())
    withheld = executor.invoke_sync("Say", {"word": "hello"})
    assert withheld.success is False and withheld.output is None
    assert withheld.error_type == "denied" and "auditor" in (withheld.error or "")


async def test_hooks_run_on_the_async_path_too() -> None:
    executor, _ = make_executor(COUNT)
    executor.add_hook(Guardrail("^secret"))
    result = await executor.invoke("Count", {"key": "secret"})
    assert result.error_type == "denied"


def test_add_hook_refuses_an_object_without_before_or_after() -> None:
    executor, _ = make_executor(ADD)
    with pytest.raises(TypeError, match="before"):
        executor.add_hook(object())


def test_a_hook_returning_something_else_fails_closed() -> None:
    class Sloppy:
        def before(self, call: ToolCall) -> Any:
            return True

    executor, _ = make_executor(ADD)
    executor.add_hook(Sloppy())
    result = executor.invoke_sync("Add", {"a": 1, "b": 2})
    assert result.error_type == "denied" and "Sloppy" in (result.error or "")
