"""`ToolDef.source`: set by the path a definition came in by, kept across restarts, tagged; and what a
change of a manifest does to the remote tools that use its entry point."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from echo_tools import ToolRegistrationError, ToolRegistry, ToolSource
from tests.echo_tools._mcp_support import stdio_config
from tests.echo_tools._storage_support import tool_dict

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A discovery folder with a copy of the shipped calculator manifest."""
    base = tmp_path / "manifests"
    shutil.copytree(REPO / "AgentTools" / "calculator", base / "calculator")
    return base


def clone_of_calculator(registry: ToolRegistry) -> dict[str, object]:
    shipped = registry.get("tool_calculator")
    assert shipped is not None
    return {"name": "My Sums", "tool_id": "my_sums", "execution_config": shipped.execution_config}


def test_each_path_sets_its_source_and_tag_and_a_restart_keeps_them(tmp_path: Path, manifests: Path) -> None:
    store = tmp_path / "tools"
    registry = ToolRegistry(store, discovery_dirs=[manifests])
    registry.discover_local_tools()
    registry.register({**tool_dict("Host Tool"), "tags": ["source:builtin", "mine"]})  # a claim, not a fact
    registry.register_remote(clone_of_calculator(registry))
    registry.add_mcp_server("calc", stdio_config())
    mcp_ids = [t.tool_id for t in registry.list_by_type("mcp")]
    assert mcp_ids
    expected = {
        "tool_calculator": ToolSource.BUILTIN,
        "tool_host_tool": ToolSource.PYTHON,
        "my_sums": ToolSource.REMOTE,
        **{tool_id: ToolSource.MCP for tool_id in mcp_ids},
    }
    for reopened in (registry, ToolRegistry(store)):  # the second one is the restart
        for tool_id, source in expected.items():
            tool = reopened.get(tool_id)
            assert tool is not None and tool.source == source, (tool_id, tool)
            assert [t for t in tool.tags if t.startswith("source:")] == [f"source:{source.value}"], tool.tags
        calculator = reopened.get("tool_calculator")
        assert calculator is not None and "category:mathematics" in calculator.tags
        assert "mine" in (reopened.get("tool_host_tool") or calculator).tags
    stored = json.loads((store / "my_sums.json").read_text())
    assert stored["source"] == "remote" and "category:mathematics" in stored["tags"]
    assert {t.tool_id for t in registry.list_by_tags(["source:builtin"])} == {"tool_calculator"}


def test_a_changed_manifest_gives_its_remote_clones_its_new_permissions(
    manifests: Path, tmp_path: Path
) -> None:
    registry = ToolRegistry(tmp_path / "tools", discovery_dirs=[manifests])
    registry.discover_local_tools()
    registry.register_remote(clone_of_calculator(registry))
    assert registry.get("my_sums").permissions == []  # type: ignore[union-attr]
    path = manifests / "calculator" / "tool_manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, "permissions": ["fs:read"], "timeout_ms": 1234}))
    registry.discover_local_tools()
    clone = registry.get("my_sums")
    assert (
        clone is not None and [p.value for p in clone.permissions] == ["fs:read"] and clone.timeout_ms == 1234
    )
    assert [p.value for p in ToolRegistry(tmp_path / "tools").get("my_sums").permissions] == ["fs:read"]  # type: ignore[union-attr]
    # the manifest stops declaring that entry point: its clone is disabled, not left runnable
    moved = {**manifest, "execution_config": {**manifest["execution_config"], "method": "evaluate"}}
    path.write_text(json.dumps(moved))
    registry.discover_local_tools()
    assert registry.get("my_sums").status.value == "disabled"  # type: ignore[union-attr]


def test_a_stored_remote_tool_naming_an_undeclared_entry_point_is_refused_at_load(tmp_path: Path) -> None:
    store = tmp_path / "tools"
    store.mkdir()
    forged = {
        "tool_id": "forged",
        "name": "Forged",
        "source": "remote",
        "execution_config": {"module": "AgentTools.code_executor.sandbox", "function": "run_python"},
    }
    (store / "forged.json").write_text(json.dumps(forged))
    registry = ToolRegistry(store)
    assert registry.get("forged") is None
    (problem,) = registry.problems()
    assert problem.path == str(store / "forged.json")
    assert "'AgentTools.code_executor.sandbox'" in problem.message


def test_register_remote_refuses_what_http_refuses_in_process_too(tmp_path: Path, manifests: Path) -> None:
    registry = ToolRegistry(tmp_path / "tools", discovery_dirs=[manifests])
    registry.discover_local_tools()
    with pytest.raises(ToolRegistrationError) as caught:
        registry.register_remote(
            {"name": "X", "tool_type": "api",
             "execution_config": {"url": "https://a.example/", "headers": {"K": "${HOME}"}}},
            allowed_env=("OTHER",),
        )  # fmt: skip
    assert caught.value.field == "execution_config.headers.K" and "'HOME'" in caught.value.message


def test_mcp_tools_keep_their_source_when_the_server_is_refreshed(tmp_path: Path) -> None:
    registry = ToolRegistry(tmp_path / "tools")
    registry.add_mcp_server("calc", stdio_config())
    registry.refresh_mcp_server("calc")
    tools = registry.list_by_type("mcp")
    assert tools and all(t.source == ToolSource.MCP for t in tools)
