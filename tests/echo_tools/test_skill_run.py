"""How a skill's run records its steps: skipped steps in a chain, run-time reference errors raised from a
step's completion, the order of `metadata["steps"]`, fallbacks and deadlines (echo_tools/backends/skill.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from echo_tools import ToolContext, ToolDef, ToolExecutor, ToolRegistry
from echo_tools.skills import compile_template
from tests.echo_tools._skill_support import NUMBER, local_tool, logged_executor, skill_tool


def _skill(steps: list[dict[str, Any]], output: Any = None, tool_id: str = "chain") -> ToolDef:
    schema = {"type": "object", "properties": {"x": NUMBER, "flag": {"type": "boolean"}}}
    return skill_tool(steps, output, tool_id=tool_id, name=tool_id, input_schema=schema)


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    reg = ToolRegistry(storage_dir=tmp_path, allowed_modules=["tests"])
    reg.register(local_tool("add", "add", {"a": NUMBER, "b": NUMBER}))
    reg.register(local_tool("echo", "echo", {}))
    reg.register(local_tool("boom", "boom", {"message": {"type": "string"}}))
    reg.register(local_tool("slow", "slow_async", {"seconds": NUMBER}))
    return reg


@pytest.fixture
async def executor(registry: ToolRegistry) -> AsyncIterator[ToolExecutor]:
    async for ex in logged_executor(registry):
        yield ex


async def test_a_skipped_step_in_a_chain_still_starts_the_steps_after_it(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill(
            [
                {"id": "last", "tool": "add", "input": {"a": "$.input.x", "b": 1}, "depends_on": ["maybe"]},
                {"id": "first", "tool": "add", "input": {"a": "$.input.x", "b": 2}},
                {"id": "maybe", "tool": "echo", "when": "$.input.flag", "depends_on": ["first"]},
            ]
        )
    )
    result = await executor.invoke("chain", {"x": 1, "flag": False})
    assert result.success, result.error
    # the default output and metadata["steps"] list the steps as declared, whatever order they ended in
    assert list(result.output) == ["last", "first", "maybe"]
    assert result.output == {"last": 2, "first": 3, "maybe": None}
    assert list(result.metadata["steps"]) == ["last", "first", "maybe"]
    assert result.metadata["steps"]["maybe"] == {"status": "skipped", "tool_id": None}
    # a step that ran at the first try names its tool and has no failed_before
    assert result.metadata["steps"]["last"] == {"status": "completed", "tool_id": "add"}


async def test_a_reference_missing_at_run_time_fails_the_skill_naming_the_step_and_the_reference(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill(
            [
                {"id": "first", "tool": "add", "input": {"a": "$.input.x", "b": 2}},
                {
                    "id": "second",
                    "tool": "echo",
                    "input": {"v": "$.steps.first.output.items"},
                    "depends_on": ["first"],
                },
            ]
        )
    )
    result = await executor.invoke("chain", {"x": 1})
    assert not result.success
    assert result.error_field == "steps.second"
    assert "step 'second' failed" in result.error and "'$.steps.first.output.items'" in result.error
    invoked = [e.tool_id for e in executor.log.of_type("tool.invoked")]  # type: ignore[attr-defined]
    assert invoked == ["chain", "add"]  # the step whose input cannot be built never runs


async def test_every_fallback_failing_names_each_tool_tried(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill([{"id": "try", "tool": "boom", "input": {"message": "nope"}, "fallback": ["boom", "boom"]}])
    )
    result = await executor.invoke("chain", {})
    assert not result.success
    assert result.error.count("boom: ") == 3 and result.error_field == "steps.try"


async def test_inner_calls_get_the_remaining_deadline_and_the_skill_stops_at_it(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill(
            [
                {"id": "wait", "tool": "slow", "input": {"seconds": 0.2}},
                {"id": "after", "tool": "slow", "input": {"seconds": 5}, "depends_on": ["wait"]},
            ]
        )
    )
    result = await executor.invoke("chain", {}, ToolContext(timeout_ms=1000))
    # the skill's own timer or the inner call's (given what was left of the same deadline) stops it
    assert not result.success and "did not finish within its timeout" in result.error, result.error
    inner = [
        e
        for e in executor.log.of_type("tool.invoked")  # type: ignore[attr-defined]
        if e.tool_id == "slow"
    ]
    assert len(inner) == 2
    outer_id = executor.log.of_type("tool.invoked")[0].call_id  # type: ignore[attr-defined]
    assert all(e.parent_call_id == outer_id for e in inner)


def test_a_template_with_constants_gives_a_new_value_on_every_run() -> None:
    template = compile_template({"a": "$.input.a", "b": 3, "nested": {"c": [1, "$.input.a"]}})
    scope = {"input": {"a": 7}, "steps": {}}
    first = template(scope)
    assert first == {"a": 7, "b": 3, "nested": {"c": [1, 7]}}
    first["b"] = 99
    first["nested"]["c"].append(0)
    assert template(scope) == {"a": 7, "b": 3, "nested": {"c": [1, 7]}}
    assert list(template(scope)) == ["a", "b", "nested"]
