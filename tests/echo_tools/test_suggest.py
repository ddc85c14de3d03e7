""" "Did you mean": mistyped tool names, unknown fields and enum values get the closest known name."""

from __future__ import annotations

import pytest

from echo_tools import ToolExecutor, ToolRegistry, builtin_tools_dir
from echo_tools.errors import ToolNotFoundError
from echo_tools.models import ToolDef
from echo_tools.schema import SchemaValidator
from echo_tools.suggest import close_matches, did_you_mean

SCHEMA = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": ["add", "mean", "median"]},
        "values": {"type": "array", "items": {"type": "number"}},
        "options": {
            "type": "object",
            "properties": {"region": {"type": "string"}},
            "additionalProperties": False,
        },
        "api_key": {"type": "string", "enum": ["k-live-1", "k-test-1"]},
    },
    "additionalProperties": False,
}


@pytest.fixture
def registry(tmp_path) -> ToolRegistry:
    registry = ToolRegistry(storage_dir=tmp_path / "store", allowed_modules=["AgentTools"])
    registry.discover_local_tools([builtin_tools_dir()])
    return registry


def test_close_matches_ignore_case_and_keep_the_candidates_spelling():
    assert close_matches("calculater", ["Calculator", "Web Search"]) == ["Calculator"]
    assert close_matches("zzz", ["Calculator"]) == []
    assert did_you_mean("valuez", ["values", "operation"]) == " Did you mean 'values'?"
    assert did_you_mean("values", ["values"]) == ""


def test_an_unknown_field_is_named_as_the_field_with_the_one_meant():
    (problem,) = SchemaValidator(SCHEMA).errors({"operation": "add", "valuez": [2, 3]})
    assert problem.startswith("input.valuez: unknown field 'valuez' (did you mean 'values'?)")
    assert "the fields are: api_key, operation, options, values" in problem


def test_unknown_fields_nested_and_several_each_get_their_suggestion():
    (nested,) = SchemaValidator(SCHEMA).errors({"options": {"regoin": "eu"}})
    assert (
        nested
        == "input.options.regoin: unknown field 'regoin' (did you mean 'region'?); the fields are: region"
    )
    (several,) = SchemaValidator(SCHEMA).errors({"valuez": [], "xyz": 1})
    assert "unknown fields 'valuez' (did you mean 'values'?), 'xyz';" in several


def test_an_enum_typo_suggests_the_allowed_value_and_a_far_one_does_not():
    (close,) = SchemaValidator(SCHEMA).errors({"operation": "meen"})
    assert close.startswith('input.operation: "meen" is not one of') and close.endswith(
        "Did you mean 'mean' or 'median'?"
    )
    (far,) = SchemaValidator(SCHEMA).errors({"operation": "zzz"})
    assert "Did you mean" not in far and '"zzz"' in far


def test_a_secret_field_stays_redacted_without_a_suggestion():
    (problem,) = SchemaValidator(SCHEMA).errors({"api_key": "k-live-2"})
    assert "k-live" not in problem and "redacted" in problem


def test_valid_input_has_no_problems():
    assert (
        SchemaValidator(SCHEMA).errors({"operation": "add", "values": [1], "options": {"region": "x"}}) == []
    )


def test_a_mistyped_tool_name_suggests_the_tool(registry):
    with pytest.raises(ToolNotFoundError) as caught:
        registry.require("calculater")
    assert str(caught.value) == "No tool matches 'calculater'. Did you mean 'Calculator'?"
    assert caught.value.field == "tool"
    with pytest.raises(ToolNotFoundError) as far:
        registry.require("qqqqqq")
    assert str(far.value) == "No tool matches 'qqqqqq'"


def test_the_executor_refuses_a_mistyped_tool_and_a_mistyped_field_saying_what_was_meant(registry):
    executor = ToolExecutor(registry)
    try:
        unknown = executor.invoke_sync("web serch", {"query": "x"})
        bad = executor.invoke_sync("Calculator", {"operation": "add", "valuez": [2, 3]})
    finally:
        executor.close()
    assert (unknown.error_type, unknown.error_field) == ("not_found", "tool")
    assert "'web serch'" in unknown.error and "Did you mean 'Web Search'?" in unknown.error
    assert (bad.error_type, bad.error_field) == ("validation", "input.valuez")
    assert "unknown field 'valuez' (did you mean 'values'?)" in bad.error


def test_a_tool_registered_with_an_open_schema_still_accepts_extra_keys(tmp_path):
    registry = ToolRegistry(storage_dir=tmp_path)
    registry.register(
        ToolDef(
            tool_id="echo",
            name="echo",
            description="Echo.",
            tool_type="mcp",
            input_schema={"type": "object", "properties": {"a": {"type": "string"}}},
            execution_config={"server": "s", "tool": "echo"},
        )
    )
    assert registry.input_errors("echo", {"a": "x", "b": 1}) == []


def test_every_shipped_tool_refuses_an_unknown_key_naming_it(registry):
    shipped = [t for t in registry.list_all() if t.tool_id.startswith("tool_")]
    assert len(shipped) >= 11
    for tool in shipped:
        assert tool.input_schema.get("additionalProperties") is False, tool.tool_id
        problems = registry.input_errors(tool.tool_id, {"zzz_unknown": 1})
        assert any(p.startswith("input.zzz_unknown: unknown field 'zzz_unknown'") for p in problems), problems


@pytest.mark.parametrize(
    ("argv", "typo", "meant"),
    [
        (["lst"], "'lst'", "'list'"),
        (["mcp", "ad"], "'ad'", "'add'"),
        (["--stroage=x", "list"], "--stroage", "'--storage'"),
    ],
)
def test_a_mistyped_command_or_global_option_exits_2_saying_what_was_meant(capsys, argv, typo, meant):
    from echo_tools.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert typo in err and f"Did you mean {meant}" in err
