"""Skills: declared pipelines of tool calls, checked at registration and run step by step by the executor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from echo_tools import ToolContext, ToolDef, ToolExecutor, ToolRegistrationError, ToolRegistry
from echo_tools.skills import compile_template, parse_skill, plan_skill, resolve_reference
from tests.echo_tools._skill_support import NUMBER, local_tool, logged_executor, skill_tool
from tests.echo_tools.fixture_tools import basic


def _skill(steps: list[dict[str, Any]], output: Any = None, **fields: Any) -> ToolDef:
    fields.setdefault("input_schema", {"type": "object", "properties": {"x": NUMBER, "y": NUMBER}})
    tool_id, name = fields.pop("tool_id", "skill_sum"), fields.pop("name", "Sum skill")
    return skill_tool(steps, output, tool_id=tool_id, name=name, **fields)


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    reg = ToolRegistry(storage_dir=tmp_path, allowed_modules=["tests"])
    reg.register(local_tool("add", "add", {"a": NUMBER, "b": NUMBER}, side_effect="pure"))
    reg.register(local_tool("echo", "echo", {}))
    reg.register(local_tool("boom", "boom", {"message": {"type": "string"}}))
    reg.register(local_tool("gated", "gated", {"key": {"type": "string"}, "release": NUMBER}))
    reg.register(local_tool("reader", "echo", {}, permissions=["fs:read"]))
    return reg


@pytest.fixture
async def executor(registry: ToolRegistry) -> AsyncIterator[ToolExecutor]:
    async for ex in logged_executor(registry):
        yield ex


async def test_steps_run_in_dependency_order_and_the_output_is_mapped(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill(
            [
                {"id": "first", "tool": "add", "input": {"a": "$.input.x", "b": 1}},
                {"id": "second", "tool": "add", "input": {"a": "$.input.y", "b": 2}},
                {
                    "id": "total",
                    "tool": "add",
                    "input": {"a": "$.steps.first.output", "b": "$.steps.second.output"},
                    "depends_on": ["first", "second"],
                },
            ],
            output={
                "sum": "$.steps.total.output",
                "parts": ["$.steps.first.output", "$.steps.second.output"],
            },
        )
    )
    result = await executor.invoke("skill_sum", {"x": 10, "y": 20})
    assert result.success, result.error
    assert result.output == {"sum": 33, "parts": [11, 22]}
    assert result.metadata["steps"]["total"]["tool_id"] == "add"
    invoked = [e.tool_id for e in executor.log.of_type("tool.invoked")]  # type: ignore[attr-defined]
    assert invoked[0] == "skill_sum" and sorted(invoked[1:]) == ["add", "add", "add"]


async def test_independent_steps_run_at_once(registry: ToolRegistry, executor: ToolExecutor) -> None:
    basic.PEAK.pop("skill", None)
    steps = [{"id": f"s{i}", "tool": "gated", "input": {"key": "skill", "release": 0.05}} for i in range(4)]
    registry.register(_skill(steps, tool_id="fan_out", name="Fan out"))
    result = await executor.invoke("fan_out", {})
    assert result.success, result.error
    assert basic.PEAK["skill"] == 4


async def test_a_failed_step_tries_its_fallbacks_and_the_result_names_the_tool_that_ran(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill(
            [{"id": "try", "tool": "boom", "input": {"message": "$.input.x"}, "fallback": ["echo"]}],
            output="$.steps.try.output",
            input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
        )
    )
    result = await executor.invoke("skill_sum", {"x": "hello"})
    assert result.success, result.error
    assert result.output == {"message": "hello"}
    step = result.metadata["steps"]["try"]
    assert step["tool_id"] == "echo"
    assert "boom" in step["failed_before"][0]


async def test_a_step_that_fails_without_fallback_fails_the_skill_naming_the_step(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill(
            [{"id": "explode", "tool": "boom", "input": {"message": "no luck"}}],
            input_schema={"type": "object", "properties": {}},
        )
    )
    result = await executor.invoke("skill_sum", {})
    assert not result.success
    assert "step 'explode' failed" in result.error and "no luck" in result.error


async def test_when_skips_a_step_whose_condition_is_falsy(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(
        _skill(
            [{"id": "maybe", "tool": "echo", "input": {"v": 1}, "when": "$.input.flag"}],
            input_schema={"type": "object", "properties": {"flag": {"type": "boolean"}}},
        )
    )
    skipped = await executor.invoke("skill_sum", {"flag": False})
    assert skipped.success and skipped.output == {"maybe": None}
    assert skipped.metadata["steps"]["maybe"]["status"] == "skipped"
    ran = await executor.invoke("skill_sum", {"flag": True})
    assert ran.output == {"maybe": {"v": 1}}


async def test_a_skill_needs_what_its_inner_tools_need(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(_skill([{"id": "read", "tool": "reader"}]))
    assert registry.get("skill_sum").permissions == ["fs:read"]
    refused = await executor.invoke("skill_sum", {}, ToolContext(granted_permissions=[]))
    assert refused.error_type == "permission_denied"
    assert not executor.log.of_type("tool.invoked")  # type: ignore[attr-defined]
    allowed = await executor.invoke("skill_sum", {}, ToolContext(granted_permissions=["fs:read"]))
    assert allowed.success, allowed.error


async def test_nesting_deeper_than_the_limit_is_stopped(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    registry.register(_skill([{"id": "e", "tool": "echo"}]))
    result = await executor.invoke("skill_sum", {}, ToolContext(depth=8, call_path=["a"] * 8))
    assert not result.success
    assert "nested calls are 8 deep, the limit is 8" in result.error


@pytest.mark.parametrize(
    ("steps", "field", "message"),
    [
        (
            [{"id": "a", "tool": "nope"}],
            "execution_config.steps[0].tool",
            "names tool 'nope', which is not registered",
        ),
        ([{"id": "a", "tool": "ech"}], "execution_config.steps[0].tool", "did you mean 'echo'"),
        (
            [{"id": "a", "tool": "echo", "fallback": ["ghost"]}],
            "execution_config.steps[0].fallback[0]",
            "names tool 'ghost'",
        ),
        (
            [{"id": "a", "tool": "echo", "input": {"v": "$.steps.b.output"}}, {"id": "b", "tool": "echo"}],
            "execution_config.steps[0]",
            "step 'b' is not among its dependencies",
        ),
        (
            [{"id": "a", "tool": "echo", "input": {"v": "$.steps.zz.output"}}],
            "execution_config.steps[0]",
            "there is no step 'zz'",
        ),
        (
            [
                {"id": "a", "tool": "echo", "depends_on": ["b"]},
                {"id": "b", "tool": "echo", "depends_on": ["a"]},
            ],
            "execution_config.steps",
            "depends_on forms a cycle: a -> b -> a",
        ),
        (
            [{"id": "a", "tool": "echo", "depends_on": ["x"]}],
            "execution_config.steps[0].depends_on",
            "not a step",
        ),
        (
            [{"id": "a", "tool": "echo"}, {"id": "a", "tool": "echo"}],
            "execution_config.steps[1].id",
            "used twice",
        ),
        (
            [{"id": "a", "tool": "echo", "input": {"v": "$.nowhere"}}],
            "execution_config.steps[0]",
            "malformed",
        ),
        ([{"id": "a b", "tool": "echo"}], "execution_config.steps.0.id", "must match"),
        ([{"id": "a", "tool": "echo", "retries": 3}], "execution_config.steps.0.retries", "Extra inputs"),
        ([], "execution_config.steps", "at least 1 item"),
    ],
)
def test_a_bad_skill_is_refused_naming_the_field_and_nothing_is_stored(
    registry: ToolRegistry, tmp_path: Path, steps: list[dict[str, Any]], field: str, message: str
) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ToolRegistrationError, match=message) as info:
        registry.register(_skill(steps))
    assert info.value.field == field
    assert registry.get("skill_sum") is None
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_skill_that_reaches_itself_is_refused_with_the_chain(registry: ToolRegistry) -> None:
    registry.register(_skill([{"id": "e", "tool": "echo"}], tool_id="outer", name="Outer"))
    registry.register(_skill([{"id": "o", "tool": "outer"}], tool_id="inner", name="Inner"))
    with pytest.raises(ToolRegistrationError, match="makes the skill call itself: outer -> inner -> outer"):
        registry.register(_skill([{"id": "i", "tool": "inner"}], tool_id="outer", name="Outer"))
    with pytest.raises(ToolRegistrationError, match="makes the skill call itself: self_loop -> self_loop"):
        registry.register(_skill([{"id": "s", "tool": "self_loop"}], tool_id="self_loop", name="Self loop"))


def test_references_read_nested_values_and_name_what_is_missing() -> None:
    scope = {"input": {"a": {"b": [1, {"c": 2}]}}, "steps": {"s": {"output": {"items": ["x"]}}}}
    assert resolve_reference("$.input.a.b[1].c", scope) == 2
    assert resolve_reference("$.steps.s.output.items[0]", scope) == "x"
    with pytest.raises(LookupError, match=r"'\$.input.a.z': .z is not there"):
        resolve_reference("$.input.a.z", scope)
    assert parse_skill("t", {"steps": [{"id": "a", "tool": "x"}]}).steps[0].tool == "x"


def test_a_compiled_template_rebuilds_nested_values_with_references_resolved_on_every_run() -> None:
    template = compile_template({"q": "$.input.q", "pair": ["$.steps.s1.output.items[1]", 7], "fixed": "x"})
    first = template({"input": {"q": "tea"}, "steps": {"s1": {"output": {"items": [1, 2]}}}})
    second = template({"input": {"q": "jam"}, "steps": {"s1": {"output": {"items": [3, 4]}}}})
    assert first == {"q": "tea", "pair": [2, 7], "fixed": "x"}
    assert second == {"q": "jam", "pair": [4, 7], "fixed": "x"}
    with pytest.raises(LookupError, match=r"'\$.steps.s1.output.items\[1\]': \[1\] is not there"):
        template({"input": {"q": "tea"}, "steps": {"s1": {"output": {"items": [1]}}}})


def test_a_skill_plan_starts_the_independent_steps_and_names_who_waits_for_whom() -> None:
    config = {
        "steps": [
            {"id": "a", "tool": "t"},
            {"id": "b", "tool": "t"},
            {"id": "c", "tool": "t", "depends_on": ["a", "b"], "input": {"x": "$.steps.a.output"}},
        ],
    }
    plan = plan_skill(parse_skill("skill_x", config))
    assert plan.roots == ["a", "b"]
    assert plan.steps["a"].dependents == ["c"] and plan.steps["b"].dependents == ["c"]
    assert plan.steps["c"].input({"input": {}, "steps": {"a": {"output": 5}}}) == {"x": 5}
    assert plan.output is None
