"""Discovery reads EchoAI's tool store as is: a stored file whose manifest has not changed is left byte for
byte (no version bump, no reformatting, no index compaction, no lock file), however often discovery runs."""

from __future__ import annotations

import shutil
from pathlib import Path

from echo_tools import ToolRegistry, builtin_tools_dir
from echo_tools.storage import LOCK_FILE
from tests.conftest import Corpus


def _echoai_layout(tmp_path: Path, corpus: Corpus) -> tuple[Path, Path]:
    """A copy of the corpus's tool store, and its manifests as `<tool>/tool_manifest.json`."""
    store = tmp_path / "apps" / "storage" / "tools"
    shutil.copytree(corpus / "tools", store)
    manifests = tmp_path / "AgentTools"
    for manifest in sorted((corpus / "manifests").glob("*.json")):
        folder = manifests / manifest.stem
        folder.mkdir(parents=True)
        shutil.copyfile(manifest, folder / "tool_manifest.json")
    return store, manifests


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_discovery_twice_leaves_every_stored_file_byte_for_byte(tmp_path: Path, corpus: Corpus) -> None:
    store, manifests = _echoai_layout(tmp_path, corpus)
    before = _snapshot(store)
    registry = ToolRegistry(storage_dir=store, discovery_dirs=[manifests])
    first = registry.discover_local_tools()
    second = ToolRegistry(storage_dir=store, discovery_dirs=[manifests]).discover_local_tools()

    assert {t.tool_id for t in first} == {t.tool_id for t in second} == set(corpus.tool_ids)
    assert registry.problems() == []
    assert _snapshot(store) == before  # same names (no lock file, no temp file) and same bytes
    assert not (store / LOCK_FILE).exists()
    assert registry.require("Calculator").version == "1.0"


def test_a_changed_manifest_is_used_while_echoais_file_stays_as_it_is(tmp_path: Path, corpus: Corpus) -> None:
    store, manifests = _echoai_layout(tmp_path, corpus)
    path = manifests / "calculator" / "tool_manifest.json"
    path.write_text(path.read_text().replace('"version": "1.0"', '"version": "1.1"'))
    before = _snapshot(store)
    registry = ToolRegistry(storage_dir=store, discovery_dirs=[manifests])
    registry.discover_local_tools()

    assert registry.require("tool_calculator").version == "1.1"
    assert _snapshot(store) == before


def test_a_store_of_our_own_still_gets_a_changed_manifest_written(tmp_path: Path, corpus: Corpus) -> None:
    _, manifests = _echoai_layout(tmp_path, corpus)
    store = tmp_path / "ours"
    ToolRegistry(storage_dir=store, discovery_dirs=[manifests]).discover_local_tools()
    path = manifests / "calculator" / "tool_manifest.json"
    path.write_text(path.read_text().replace('"version": "1.0"', '"version": "1.1"'))
    before = _snapshot(store)
    ToolRegistry(storage_dir=store, discovery_dirs=[manifests]).discover_local_tools()

    after = _snapshot(store)
    assert '"version": "1.1"' in after["tool_calculator.json"].decode()
    for name in ("tool_code_generator.json", "tool_code_reviewer.json", "tool_web_search.json"):
        assert after[name] == before[name], name


def test_the_shipped_tools_over_echoais_store_leave_its_files_and_run_the_shipped_code(
    tmp_path: Path, corpus: Corpus
) -> None:
    store, _ = _echoai_layout(tmp_path, corpus)
    before = _snapshot(store)
    registry = ToolRegistry(storage_dir=store, discovery_dirs=[builtin_tools_dir()])
    registry.discover_local_tools()
    registry.discover_local_tools()
    registry.reload()  # a re-read of the folder keeps the shipped definitions

    assert _snapshot(store) == before  # EchoAI's five files and its index: byte for byte
    calculator = registry.require("tool_calculator")
    assert calculator.version != "1.0" and calculator.source == "builtin"
    assert "evaluate" in calculator.input_schema["properties"]["operation"]["enum"]  # the shipped manifest
    assert registry.resolve("tool_http_request") is not None  # shipped tools EchoAI never had
    again = ToolRegistry(storage_dir=store, discovery_dirs=[builtin_tools_dir()])
    again.discover_local_tools()
    assert again.require("Calculator").version == calculator.version
    assert _snapshot(store)["tool_calculator.json"] == before["tool_calculator.json"]
