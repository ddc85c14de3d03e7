"""Every AgentTools manifest validates, is discovered, and keeps EchoAI's input schemas."""

from __future__ import annotations

import json

import pytest

from tests.agent_tools._support import AGENT_TOOLS, TOOL_FOLDERS, discovered_registry
from tests.conftest import corpus_cases

ECHOAI_TOOLS = corpus_cases(lambda c: [n for n in c.manifests if n in TOOL_FOLDERS])


def test_discovery_registers_every_tool_without_problems():
    registry = discovered_registry()
    assert registry.problems() == []
    ids = {tool.tool_id for tool in registry.list_all()}
    for folder in TOOL_FOLDERS:
        manifest = json.loads((AGENT_TOOLS / folder / "tool_manifest.json").read_text())
        assert manifest["tool_id"] in ids
        assert manifest["execution_config"]["module"] == f"AgentTools.{folder}.service"


def test_every_manifest_names_a_callable_that_exists():
    import importlib

    for tool in discovered_registry().list_all():
        config = tool.execution_config
        module = importlib.import_module(config["module"])
        target = getattr(module, config["class"])() if "class" in config else module
        assert callable(getattr(target, config.get("method") or config["function"]))


def _compatible(ours: dict, theirs: dict, where: str) -> None:
    if "type" in theirs:
        assert ours.get("type") == theirs["type"], f"{where}: type {ours.get('type')!r} != {theirs['type']!r}"
    if "enum" in theirs:
        assert set(theirs["enum"]) <= set(ours.get("enum", [])), f"{where}: enum narrowed"
    for key, sub in theirs.get("properties", {}).items():
        assert key in ours.get("properties", {}), f"{where}.{key} missing"
        _compatible(ours["properties"][key], sub, f"{where}.{key}")
    assert set(ours.get("required", [])) <= set(theirs.get("required", [])) | set(
        ours.get("properties", {})
    ), f"{where}: required"
    assert set(theirs.get("required", [])) <= set(ours.get("properties", {})), (
        f"{where}: required key missing"
    )
    if "items" in theirs:
        _compatible(ours["items"], theirs["items"], f"{where}[]")


@pytest.mark.parametrize(("corpus", "name"), ECHOAI_TOOLS, indirect=["corpus"])
def test_echoai_input_schema_is_still_accepted_by_ours(name, corpus):
    theirs = json.loads((corpus / "manifests" / f"{name}.json").read_text())
    ours = json.loads((AGENT_TOOLS / name / "tool_manifest.json").read_text())
    assert ours["tool_id"] == theirs["tool_id"]
    assert ours["name"] == theirs["name"]
    assert ours["execution_config"] == theirs["execution_config"]
    _compatible(ours["input_schema"], theirs["input_schema"], "input_schema")
    # nothing EchoAI did not require becomes required
    assert set(ours["input_schema"].get("required", [])) <= set(theirs["input_schema"].get("required", []))


@pytest.mark.parametrize(("corpus", "name"), ECHOAI_TOOLS, indirect=["corpus"])
def test_echoai_stored_agents_bind_to_our_tool_ids(name, corpus):
    registry = discovered_registry()
    stored = json.loads((corpus / "tools" / f"tool_{name}.json").read_text())
    assert registry.resolve(stored["tool_id"]) is not None
    assert registry.resolve(stored["name"]).tool_id == stored["tool_id"]
