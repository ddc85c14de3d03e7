"""ToolDef and friends: EchoAI's files load unchanged, ids are derived and checked, results raise right."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from echo_tools.errors import (
    ToolDisabledError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolOutputValidationError,
    ToolPermissionError,
    ToolTimeoutError,
    ToolValidationError,
)
from echo_tools.models import (
    SideEffect,
    ToolContext,
    ToolDef,
    ToolPermission,
    ToolResult,
    ToolStatus,
    ToolType,
    check_tool_id,
    name_keys,
    slugify,
)
from tests.conftest import Corpus, corpus_cases


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize(("corpus", "stem"), corpus_cases(lambda c: c.tool_ids), indirect=["corpus"])
def test_every_stored_echoai_tool_file_loads_unchanged(corpus: Corpus, stem: str) -> None:
    data = _load(corpus / "tools" / f"{stem}.json")
    tool = ToolDef.model_validate(data)
    dumped = tool.to_storage_dict()
    for key, value in data.items():
        if key != "_saved_at":
            assert dumped[key] == value, key
    assert tool.tool_id == stem


@pytest.mark.parametrize(("corpus", "stem"), corpus_cases(lambda c: c.manifests), indirect=["corpus"])
def test_every_echoai_manifest_loads_and_equals_its_stored_copy(corpus: Corpus, stem: str) -> None:
    manifest = ToolDef.model_validate(_load(corpus / "manifests" / f"{stem}.json"))
    stored = ToolDef.model_validate(_load(corpus / "tools" / f"tool_{stem}.json"))
    assert manifest.to_storage_dict() == stored.to_storage_dict()
    assert manifest.tool_type is ToolType.LOCAL


def test_the_corpus_folders_hold_exactly_the_files_these_tests_expect(corpus: Corpus) -> None:
    tools = sorted(p.stem for p in (corpus / "tools").glob("*.json"))
    assert tools == sorted([*corpus.tool_ids, "tool_index"])
    assert sorted(p.stem for p in (corpus / "manifests").glob("*.json")) == list(corpus.manifests)


def test_the_legacy_name_and_description_form_loads_with_defaults() -> None:
    tool = ToolDef.model_validate({"name": "My Tool", "description": "does things"})
    assert tool.tool_id == "tool_my_tool"
    assert tool.tool_type is ToolType.LOCAL
    assert tool.status is ToolStatus.ACTIVE
    assert tool.input_schema == {} and tool.output_schema == {} and tool.execution_config == {}
    assert tool.timeout_ms == 30_000 and tool.side_effect is SideEffect.EXTERNAL
    assert tool.retry.max_retries == 0 and tool.permissions == []


@pytest.mark.parametrize("given", ["LOCAL", "Local", " local ", "local"])
def test_tool_type_is_read_in_any_case(given: str) -> None:
    assert ToolDef(name="X", tool_type=given).tool_type is ToolType.LOCAL


def test_status_and_side_effect_are_read_in_any_case_and_unknown_keys_ignored() -> None:
    tool = ToolDef.model_validate(
        {"name": "X", "status": "DISABLED", "side_effect": "Pure", "_saved_at": "2026-01-01", "extra": 1}
    )
    assert tool.status is ToolStatus.DISABLED and tool.side_effect is SideEffect.PURE
    assert "extra" not in tool.to_storage_dict()


def test_numeric_version_is_kept_as_text() -> None:
    assert ToolDef(name="X", version=2).version == "2"
    assert ToolDef(name="X", version=1.5).version == "1.5"


@pytest.mark.parametrize(
    ("name", "tool_id", "slug"),
    [
        ("Web Search", "tool_web_search", "web_search"),
        ("web-search", "tool_web_search", "web_search"),
        ("WEB_SEARCH", "tool_web_search", "web_search"),
        ("Café Menu", "tool_cafe_menu", "cafe_menu"),
        ("Tool Web Search", "tool_web_search", "tool_web_search"),
    ],
)
def test_tool_id_is_derived_from_the_name_as_echoai_does(name: str, tool_id: str, slug: str) -> None:
    tool = ToolDef(name=name)
    assert (tool.tool_id, tool.slug) == (tool_id, slug)


def test_a_name_without_letters_needs_an_explicit_tool_id() -> None:
    with pytest.raises(ValidationError, match="cannot derive a tool_id from name '计算器'"):
        ToolDef(name="计算器")
    tool = ToolDef(name="计算器", tool_id="calc.v2")
    assert tool.llm_name == "calc_v2"
    assert "计算器" in tool.lookup_keys()


def test_llm_name_is_a_safe_identifier_of_at_most_64_characters() -> None:
    tool = ToolDef(name="A very long tool name " * 8)
    assert len(tool.llm_name) == 64
    assert all(c.isalnum() or c == "_" for c in tool.llm_name)


def test_name_keys_treat_case_and_punctuation_alike() -> None:
    assert name_keys("Web Search") & name_keys("web-search")
    assert name_keys("Web Search") & name_keys("WEB SEARCH")
    assert not name_keys("Web Search") & name_keys("Web Searcher")


def test_slugify_folds_accents_and_collapses_punctuation() -> None:
    assert slugify("  Ünïcode -- Tool!! ") == "unicode_tool"
    assert slugify("!!!") == ""


@pytest.mark.parametrize("tool_id", ["tool_x", "a", "x.y-z_1", "9lives", "a" * 128])
def test_safe_tool_ids_are_accepted(tool_id: str) -> None:
    assert check_tool_id(tool_id) == tool_id


@pytest.mark.parametrize(
    "name",
    [
        "Line\nbreak",
        "tab\there",
        "nul\x00",
        "next\u0085line",
        "line\u2028sep",
        "evil\u202etxt.exe",
        "para\u2029graph",
    ],
)
def test_control_format_and_separator_characters_in_a_name_are_refused(name: str) -> None:
    with pytest.raises(
        ValidationError, match="must not contain control, format or line-separator characters"
    ):
        ToolDef(name=name)


def test_a_definition_without_a_source_is_a_python_one_and_keeps_the_output_bound() -> None:
    tool = ToolDef(name="x")
    assert tool.source == "python"
    assert tool.max_output_chars == 20_000
    assert ToolDef(name="x", source="REMOTE").source == "remote"


def test_a_blank_name_is_refused() -> None:
    with pytest.raises(ValidationError, match="name must not be empty"):
        ToolDef(name="   ")


def test_permissions_and_retry_policy_are_validated() -> None:
    tool = ToolDef(
        name="X", permissions=["fs:read", "net:outbound"], retry={"max_retries": 2, "backoff_ms": 10}
    )
    assert tool.permissions == [ToolPermission.FS_READ, ToolPermission.NET_OUTBOUND]
    with pytest.raises(ValidationError, match="permissions"):
        ToolDef(name="X", permissions=["root:everything"])
    with pytest.raises(ValidationError, match="max_retries"):
        ToolDef(name="X", retry={"max_retries": 99})
    assert ToolDef(name="X", retry=None).retry.max_retries == 0


def test_tool_context_ids_are_what_events_carry() -> None:
    context = ToolContext(agent_id="agt_1", run_id="run_1", tool_call_id="call_1")
    assert context.ids() == {
        "agent_id": "agt_1",
        "agent_name": None,
        "workflow_id": None,
        "run_id": "run_1",
        "node_id": None,
        "tool_call_id": "call_1",
        "trace_id": None,
    }
    assert context.granted_permissions is None


@pytest.mark.parametrize(
    ("error_type", "error_class"),
    [
        ("not_found", ToolNotFoundError),
        ("disabled", ToolDisabledError),
        ("permission_denied", ToolPermissionError),
        ("validation", ToolValidationError),
        ("execution", ToolExecutionError),
        ("timeout", ToolTimeoutError),
        ("output_validation", ToolOutputValidationError),
    ],
)
def test_raise_for_error_raises_the_class_matching_error_type(error_type: str, error_class: type) -> None:
    result = ToolResult(tool_id="tool_x", name="X", success=False, error="it broke", error_type=error_type)
    with pytest.raises(error_class, match="it broke") as caught:
        result.raise_for_error()
    assert caught.value.tool_id == "tool_x"


def test_raise_for_error_returns_a_successful_result() -> None:
    result = ToolResult(tool_id="tool_x", name="X", output=[1, 2])
    assert result.raise_for_error() is result
