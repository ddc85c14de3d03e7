"""Discovery: `*/tool_manifest.json` under the discovery folders; new tools registered, changed ones
updated (EchoAI skipped them), unchanged ones left alone, bad ones reported without stopping the scan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools.events import MemoryEventLog
from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE
from tests.conftest import TOOL_IDS, Corpus

from ._storage_support import corpus_copy, folder_state, tool_dict, write_manifest

CORPUS_IDS = list(TOOL_IDS)  # the same five ids in our fixtures and in the real corpus


@pytest.fixture
def agent_tools(corpus: Corpus, tmp_path: Path) -> Path:
    """An AgentTools-like folder: one subfolder per corpus manifest."""
    base = tmp_path / "AgentTools"
    for manifest in sorted((corpus / "manifests").glob("*.json")):
        write_manifest(base, manifest.stem, None, raw=manifest.read_text(encoding="utf-8"))
    return base


def test_discovery_registers_every_manifest(agent_tools: Path, tmp_path: Path) -> None:
    log = MemoryEventLog()
    registry = ToolRegistry(storage_dir=tmp_path / "store", discovery_dirs=[agent_tools], event_sinks=[log])
    found = registry.discover_local_tools()
    assert [t.tool_id for t in found] == CORPUS_IDS
    assert registry.problems() == []
    assert sorted(json.loads((tmp_path / "store" / INDEX_FILE).read_text())["tools"]) == CORPUS_IDS
    assert [e.metadata["status"] for e in log.events] == ["registered"] * 5


def test_rediscovering_unchanged_manifests_writes_nothing(agent_tools: Path, tmp_path: Path) -> None:
    log = MemoryEventLog()
    registry = ToolRegistry(storage_dir=tmp_path / "store", discovery_dirs=[agent_tools], event_sinks=[log])
    registry.discover_local_tools()
    before = folder_state(tmp_path / "store")
    assert len(registry.discover_local_tools()) == 5
    assert folder_state(tmp_path / "store") == before
    assert len(log.events) == 5


def test_discovery_over_echoais_own_stored_copies_writes_nothing(
    corpus: Corpus, agent_tools: Path, tmp_path: Path
) -> None:
    store = corpus_copy(corpus, tmp_path / "store")
    before = folder_state(store)
    registry = ToolRegistry(storage_dir=store, discovery_dirs=[agent_tools])
    assert len(registry.discover_local_tools()) == 5
    assert folder_state(store) == before  # manifests and stored files are semantically identical


def test_an_edited_manifest_updates_the_stored_copy(agent_tools: Path, tmp_path: Path) -> None:
    log = MemoryEventLog()
    registry = ToolRegistry(storage_dir=tmp_path / "store", discovery_dirs=[agent_tools], event_sinks=[log])
    registry.discover_local_tools()
    manifest = agent_tools / "web_search" / "tool_manifest.json"
    data = json.loads(manifest.read_text())
    data["description"] = "Searches the web with a better description"
    data["input_schema"]["properties"]["max_results"]["maximum"] = 20
    manifest.write_text(json.dumps(data))
    registry.discover_local_tools()
    stored = json.loads((tmp_path / "store" / "tool_web_search.json").read_text())
    assert stored["description"] == "Searches the web with a better description"
    assert stored["input_schema"]["properties"]["max_results"]["maximum"] == 20
    assert registry.resolve("Web Search").description == "Searches the web with a better description"
    assert [e.metadata["status"] for e in log.events][-1] == "updated"
    assert (
        ToolRegistry(storage_dir=tmp_path / "store").get("tool_web_search").description
        == stored["description"]
    )


def test_bad_manifests_are_reported_and_the_scan_goes_on(agent_tools: Path, tmp_path: Path) -> None:
    bad = {
        "not_json": write_manifest(agent_tools, "not_json", None, raw='{"name": "Broken", '),
        "a_list": write_manifest(agent_tools, "a_list", ["name", "List"]),
        "no_name": write_manifest(agent_tools, "no_name", {"description": "who am I"}),
        "bad_schema": write_manifest(
            agent_tools, "bad_schema", tool_dict("Bad Schema", input_schema={"type": "strin"})
        ),
        "uses_os": write_manifest(
            agent_tools,
            "uses_os",
            tool_dict("Uses OS", execution_config={"module": "os", "function": "system"}),
        ),
        # scanned after web_search/ (folders go in sorted order), so this one is the newcomer that clashes
        "zz_clash": write_manifest(
            agent_tools, "zz_clash", tool_dict("web-search", tool_id="another_search")
        ),
    }
    (agent_tools / "empty_folder").mkdir()
    (agent_tools / "stray.json").write_text("{}")
    registry = ToolRegistry(storage_dir=tmp_path / "store", discovery_dirs=[agent_tools])
    found = registry.discover_local_tools()
    assert [t.tool_id for t in found] == CORPUS_IDS
    problems = {Path(p.path).parent.name: p.message for p in registry.problems()}
    assert set(problems) == set(bad)
    assert "manifest is not valid JSON" in problems["not_json"]
    assert "manifest must be a JSON object, got list" in problems["a_list"]
    assert "manifest has no 'name' field" in problems["no_name"]
    assert "input_schema is not a valid JSON Schema at type: 'strin'" in problems["bad_schema"]
    assert "execution_config.module 'os'" in problems["uses_os"]
    assert "clashes with tool 'Web Search'" in problems["zz_clash"]
    assert all(Path(p.path).name == "tool_manifest.json" for p in registry.problems())


def test_problems_of_the_last_scan_replace_older_ones(agent_tools: Path, tmp_path: Path) -> None:
    broken = write_manifest(agent_tools, "broken", None, raw="nope")
    registry = ToolRegistry(storage_dir=tmp_path / "store", discovery_dirs=[agent_tools])
    registry.discover_local_tools()
    assert [p.path for p in registry.problems()] == [str(broken)]
    broken.write_text(json.dumps(tool_dict("Fixed Now")))
    assert len(registry.discover_local_tools()) == 6
    assert registry.problems() == []


def test_a_missing_discovery_folder_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path / "store", discovery_dirs=[tmp_path / "nowhere"])
    assert registry.discover_local_tools() == []
    (problem,) = registry.problems()
    assert problem.path == str(tmp_path / "nowhere") and "cannot be read" in problem.message


def test_explicit_folders_override_the_configured_ones(agent_tools: Path, tmp_path: Path) -> None:
    registry = ToolRegistry(discovery_dirs=[tmp_path / "nowhere"])
    assert len(registry.discover_local_tools(dirs=[agent_tools])) == 5
    assert registry.problems() == []


def test_a_manifest_without_tool_id_gets_one_from_its_name(tmp_path: Path) -> None:
    base = tmp_path / "tools"
    write_manifest(base, "mine", {"name": "My Helper", "description": "legacy shape"})
    (tool,) = ToolRegistry().discover_local_tools(dirs=[base])
    assert tool.tool_id == "tool_my_helper" and tool.execution_config == {}


def test_an_oversized_manifest_is_refused(tmp_path: Path) -> None:
    base = tmp_path / "tools"
    write_manifest(base, "huge", tool_dict("Huge", description="x" * (1024 * 1024 + 1)))
    registry = ToolRegistry()
    assert registry.discover_local_tools(dirs=[base]) == []
    assert "bytes, more than the 1048576 allowed" in registry.problems()[0].message
