"""ToolRegistry.register_many: a batch is checked in full, then stored with one lock and one index write;
a bad definition, a name clash or a failed write leaves every stored file as it was."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest

import echo_tools.catalogue as registry_module
from echo_tools import (
    ToolEvent,
    ToolNameConflictError,
    ToolReadOnlyError,
    ToolRegistrationError,
    ToolRegistry,
    ToolStorageError,
)
from echo_tools.models import ToolDef
from tests.echo_tools._storage_support import folder_state


def api_tool(name: str, **overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name,
        "tool_type": "api",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string", "description": name}}},
        "execution_config": {"url": f"https://api.example.com/{name.lower()}"},
    }
    data.update(overrides)
    return data


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "tools"


def test_a_batch_is_stored_and_read_back_by_another_registry(store: Path) -> None:
    events: list[ToolEvent] = []
    registry = ToolRegistry(store, event_sinks=[events.append])
    results = registry.register_many([api_tool("Alpha"), api_tool("Beta"), api_tool("Gamma")])
    assert results == [{"tool_id": f"tool_{n}", "status": "registered"} for n in ("alpha", "beta", "gamma")]
    assert [e.tool_id for e in events] == ["tool_alpha", "tool_beta", "tool_gamma"]
    index = json.loads((store / "tool_index.json").read_text())
    assert sorted(index["tools"]) == ["tool_alpha", "tool_beta", "tool_gamma"]
    assert index["tool_count"] == 3
    again = ToolRegistry(store)
    assert [t.name for t in again.list_all()] == ["Alpha", "Beta", "Gamma"]
    assert again.problems() == []


def test_registering_the_same_batch_again_writes_nothing_and_emits_nothing(store: Path) -> None:
    events: list[ToolEvent] = []
    registry = ToolRegistry(store, event_sinks=[events.append])
    batch = [api_tool("Alpha"), api_tool("Beta")]
    registry.register_many(batch)
    before = folder_state(store)
    events.clear()
    results = registry.register_many(batch)
    assert [r["status"] for r in results] == ["updated", "updated"]
    assert events == []
    assert folder_state(store) == before


def test_a_bad_definition_stores_nothing_and_is_named_with_its_field(store: Path) -> None:
    registry = ToolRegistry(store)
    registry.register(api_tool("Alpha"))
    before = folder_state(store)
    bad = api_tool("Broken", input_schema={"type": "object", "properties": {"q": {"type": "strnig"}}})
    with pytest.raises(ToolRegistrationError) as caught:
        registry.register_many([api_tool("Alpha", description="changed"), api_tool("Beta"), bad])
    assert caught.value.tool_id == "tool_broken"
    assert caught.value.field == "input_schema"
    assert "'strnig'" in caught.value.message
    assert folder_state(store) == before
    alpha = registry.get("tool_alpha")
    assert alpha is not None and alpha.description == ""
    assert registry.get("tool_beta") is None


def test_a_non_string_description_is_refused_after_a_schema_of_the_same_wording_passed(store: Path) -> None:
    # the meta-check runs once per shape (descriptions blanked): a description that is not a string
    # makes another shape, so it is still checked and refused
    registry = ToolRegistry(store)
    bad = api_tool("Broken", input_schema={"type": "object", "properties": {"q": {"description": 5}}})
    with pytest.raises(ToolRegistrationError) as caught:
        registry.register_many([api_tool("Alpha"), bad])
    assert (caught.value.tool_id, caught.value.field) == ("tool_broken", "input_schema")
    assert "5 is not of type 'string'" in caught.value.message
    assert not (store / "tool_alpha.json").exists()


def test_schemas_that_differ_only_in_wording_are_meta_checked_once(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[Any] = []
    real = registry_module.check_schema

    def counting(schema: Any, **kwargs: Any) -> None:
        checked.append(schema)
        real(schema, **kwargs)

    monkeypatch.setattr(registry_module, "check_schema", counting)
    registry = ToolRegistry(store)
    registry.register_many([api_tool(f"Tool {n}", description=f"number {n}") for n in range(20)])
    # one input schema shape (descriptions differ) and the empty output schema
    assert len(checked) == 2
    assert len(registry) == 20


def test_the_same_id_twice_in_a_batch_is_refused(store: Path) -> None:
    registry = ToolRegistry(store)
    with pytest.raises(ToolRegistrationError) as caught:
        registry.register_many([api_tool("Alpha"), api_tool("Beta"), api_tool("Alpha", description="again")])
    assert (caught.value.tool_id, caught.value.field) == ("tool_alpha", "tool_id")
    assert "twice" in caught.value.message
    assert len(registry) == 0
    assert not (store / "tool_alpha.json").exists()


def test_two_names_of_one_batch_that_clash_are_refused(store: Path) -> None:
    registry = ToolRegistry(store)
    with pytest.raises(ToolNameConflictError) as caught:
        registry.register_many([api_tool("Web Search"), api_tool("web-search!", tool_id="other_search")])
    assert (caught.value.tool_id, caught.value.field) == ("other_search", "name")
    assert "'Web Search'" in caught.value.message
    assert len(registry) == 0


def test_a_name_another_process_stored_meanwhile_refuses_the_whole_batch(store: Path) -> None:
    ours = ToolRegistry(store)
    ours.register(api_tool("Alpha"))
    theirs = ToolRegistry(store)
    theirs.register(api_tool("Forecast", tool_id="their_forecast"))
    before = folder_state(store)
    with pytest.raises(ToolNameConflictError) as caught:
        ours.register_many([api_tool("Alpha", description="changed"), api_tool("Forecast")])
    assert caught.value.tool_id == "tool_forecast"
    assert "'their_forecast'" in caught.value.message
    assert folder_state(store) == before


def test_the_replaces_guard_refuses_before_anything_is_written(store: Path) -> None:
    registry = ToolRegistry(store)
    registry.register(api_tool("Alpha"))
    before = folder_state(store)

    def only_new(current: ToolDef) -> None:
        raise ToolReadOnlyError(f"{current.tool_id!r} exists", tool_id=current.tool_id, field="tool_id")

    with pytest.raises(ToolReadOnlyError) as caught:
        registry.register_many([api_tool("Beta"), api_tool("Alpha", description="x")], replaces=only_new)
    assert caught.value.tool_id == "tool_alpha"
    assert folder_state(store) == before
    assert registry.get("tool_beta") is None


def fail_renames_to(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real_replace = os.replace

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        if os.fspath(dst).endswith(name):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)


@pytest.mark.parametrize("failing", ["tool_gamma.json", "tool_index.json"])
def test_a_failed_rename_midway_puts_every_file_back(
    store: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    registry = ToolRegistry(store)
    registry.register_many([api_tool("Alpha"), api_tool("Beta")])
    before = folder_state(store)
    fail_renames_to(monkeypatch, failing)
    changed = [api_tool(n, description="changed") for n in ("Alpha", "Beta", "Gamma", "Delta")]
    with pytest.raises(ToolStorageError) as caught:
        registry.register_many(changed)
    monkeypatch.undo()
    assert str(store) in caught.value.message
    assert "Input/output error" in caught.value.message
    assert folder_state(store) == before
    assert registry.get("tool_gamma") is None
    restarted = ToolRegistry(store)
    assert [t.description for t in restarted.list_all()] == ["", ""]


def test_an_in_memory_registry_takes_a_batch_too() -> None:
    registry = ToolRegistry()
    results = registry.register_many([api_tool("Alpha"), api_tool("Beta")])
    assert [r["status"] for r in results] == ["registered", "registered"]
    assert registry.require("beta").tool_id == "tool_beta"
