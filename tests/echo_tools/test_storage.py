"""ToolStorage: EchoAI's folder layout, atomic writes, damaged files kept aside, changes seen across writers."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import pytest

from echo_tools.errors import ToolNameConflictError, ToolStorageError
from echo_tools.models import ToolDef
from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE, ToolStorage, atomic_write_json
from tests.conftest import TOOL_IDS, Corpus

from ._storage_support import corpus_copy, folder_state, tool_dict

CORPUS_IDS = list(TOOL_IDS)  # the same five ids in our fixtures and in the real corpus


@pytest.fixture
def echoai_folder(corpus: Corpus, tmp_path: Path) -> Path:
    return corpus_copy(corpus, tmp_path / "tools")


def test_a_copy_of_echoais_folder_loads_all_five_tools_and_skips_the_index(echoai_folder: Path) -> None:
    tools, problems = ToolStorage(echoai_folder).load_all()
    assert [t.tool_id for t in tools] == CORPUS_IDS
    assert problems == []


def test_the_echoai_index_is_read_as_the_index(echoai_folder: Path) -> None:
    index = ToolStorage(echoai_folder).read_index()
    assert sorted(index["tools"]) == CORPUS_IDS and index["tool_count"] == 5


def test_a_save_keeps_echoais_index_shape(echoai_folder: Path) -> None:
    storage = ToolStorage(echoai_folder)
    before = storage.read_index()
    tool = storage.load("tool_calculator")
    assert tool is not None
    assert storage.save(tool.model_copy(update={"version": "1.1"})) is True
    index = json.loads((echoai_folder / INDEX_FILE).read_text())
    assert list(index) == ["tools", "created_at", "last_updated", "tool_count"]
    assert index["created_at"] == before["created_at"]
    assert index["tool_count"] == len(index["tools"]) == 5
    entry = index["tools"]["tool_calculator"]
    assert set(entry) == {"name", "tool_type", "status", "version", "tags", "updated_at"}
    assert entry["version"] == "1.1" and entry["tool_type"] == "local"
    assert index["tools"]["tool_web_search"] == before["tools"]["tool_web_search"]
    assert "Z" not in index["last_updated"] and "+" not in index["last_updated"]  # EchoAI's naive UTC


def test_a_saved_file_is_echoais_tool_shape_with_saved_at(tmp_path: Path) -> None:
    storage = ToolStorage(tmp_path)
    tool = ToolDef.model_validate(tool_dict("Sample"))
    storage.save(tool)
    stored = json.loads((tmp_path / "tool_sample.json").read_text(encoding="utf-8"))
    assert stored.pop("_saved_at")
    assert stored == tool.to_storage_dict()
    assert storage.load("tool_sample") == tool


def test_saving_an_identical_tool_writes_nothing(tmp_path: Path) -> None:
    storage = ToolStorage(tmp_path)
    tool = ToolDef.model_validate(tool_dict("Sample"))
    assert storage.save(tool) is True
    before = {p.name: os.stat(p).st_ino for p in tmp_path.iterdir()}
    assert storage.save(ToolDef.model_validate(tool.to_storage_dict())) is False
    assert {p.name: os.stat(p).st_ino for p in tmp_path.iterdir()} == before


def test_writes_leave_no_temp_files(tmp_path: Path) -> None:
    storage = ToolStorage(tmp_path)
    for i in range(5):
        storage.save(ToolDef.model_validate(tool_dict(f"Sample {i}")))
    storage.delete("tool_sample_0")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".echo_tools.lock",
        "tool_index.json",
        "tool_sample_1.json",
        "tool_sample_2.json",
        "tool_sample_3.json",
        "tool_sample_4.json",
    ]


def test_atomic_write_replaces_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    atomic_write_json(target, {"a": "long value " * 100})
    atomic_write_json(target, {"a": 1})
    assert json.loads(target.read_text()) == {"a": 1}


def test_a_corrupt_tool_file_is_reported_skipped_and_moved_aside_before_a_new_version(
    echoai_folder: Path,
) -> None:
    damaged = echoai_folder / "tool_calculator.json"
    damaged.write_text('{"tool_id": "tool_calculator", "name": "Calc', encoding="utf-8")
    storage = ToolStorage(echoai_folder)
    tools, problems = storage.load_all()
    assert "tool_calculator" not in [t.tool_id for t in tools] and len(tools) == 4
    (problem,) = problems
    assert problem.path == str(damaged) and "is not valid JSON" in problem.message
    storage.save(ToolDef.model_validate(tool_dict("Calculator", tool_id="tool_calculator")))
    (backup,) = echoai_folder.glob("tool_calculator.json.corrupt-*")
    assert backup.read_text(encoding="utf-8") == '{"tool_id": "tool_calculator", "name": "Calc'
    assert storage.load_all()[1] == []


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1, 2]", "must hold a JSON object, got list"),
        ('{"name": ""}', "name: Value error, name must not be empty"),
        ('{"name": "X", "tool_type": "shell"}', "tool_type 'shell' is unknown"),
        (
            '{"tool_id": "tool_other", "name": "X"}',
            "holds tool_id 'tool_other', which does not match its file name",
        ),
        (b"\xff\xfe{}", "is not valid JSON"),
    ],
)
def test_an_unusable_tool_file_is_a_problem_naming_the_file(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = tmp_path / "tool_bad.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    tools, problems = ToolStorage(tmp_path).load_all()
    assert tools == []
    assert [p.path for p in problems] == [str(path)]
    assert message in problems[0].message


def test_a_legacy_file_without_tool_id_takes_its_id_from_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "my_tool.json").write_text('{"name": "Something", "description": "legacy"}')
    (tool,), problems = ToolStorage(tmp_path).load_all()
    assert problems == [] and tool.tool_id == "my_tool" and tool.name == "Something"


def test_files_that_are_not_tools_are_ignored(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / ".tmp-abc.json").write_text("{")
    (tmp_path / "mcp_servers.json").write_text('{"mcpServers": {}}')
    (tmp_path / "tool_x.json.corrupt-1").write_text("{")
    assert ToolStorage(tmp_path).load_all() == ([], [])


def test_delete_removes_the_file_and_the_index_entry(echoai_folder: Path) -> None:
    storage = ToolStorage(echoai_folder)
    assert storage.delete("tool_web_search") is True
    assert not (echoai_folder / "tool_web_search.json").exists()
    index = storage.read_index()
    assert "tool_web_search" not in index["tools"] and index["tool_count"] == 4
    assert storage.delete("tool_web_search") is False


def test_a_stored_name_clash_is_refused_even_from_another_storage_object(tmp_path: Path) -> None:
    ToolStorage(tmp_path).save(ToolDef.model_validate(tool_dict("Web Search")))
    other_writer = ToolStorage(tmp_path)
    before = folder_state(tmp_path)
    with pytest.raises(ToolNameConflictError) as caught:
        other_writer.save(ToolDef.model_validate(tool_dict("web-search", tool_id="my_search")))
    assert "'web-search'" in str(caught.value) and "'tool_web_search'" in str(caught.value)
    assert caught.value.field == "name"
    assert folder_state(tmp_path) == before


def test_a_damaged_index_is_kept_aside_and_rebuilt_on_the_next_write(echoai_folder: Path) -> None:
    index_path = echoai_folder / INDEX_FILE
    index_path.write_text(index_path.read_text()[:100])
    storage = ToolStorage(echoai_folder)
    with pytest.raises(ToolStorageError, match="cannot be read"):
        storage.read_index()
    storage.save(ToolDef.model_validate(tool_dict("Sample")))
    assert sorted(storage.read_index()["tools"]) == sorted([*CORPUS_IDS, "tool_sample"])
    (backup,) = echoai_folder.glob("tool_index.json.corrupt-*")
    assert len(backup.read_text()) == 100


def test_repair_index_lists_exactly_the_tool_files_and_keeps_unchanged_entries(echoai_folder: Path) -> None:
    storage = ToolStorage(echoai_folder)
    before = storage.read_index()
    (echoai_folder / "tool_code_reviewer.json").unlink()
    (echoai_folder / "tool_extra.json").write_text(json.dumps(tool_dict("Extra")))
    assert storage.index_matches(t.tool_id for t in storage.load_all()[0]) is False
    assert storage.repair_index() is True
    index = storage.read_index()
    assert sorted(index["tools"]) == sorted({*CORPUS_IDS, "tool_extra"} - {"tool_code_reviewer"})
    assert index["tools"]["tool_web_search"] == before["tools"]["tool_web_search"]
    assert storage.repair_index() is False


def test_rebuild_index_keeps_a_damaged_index_aside(echoai_folder: Path) -> None:
    (echoai_folder / INDEX_FILE).write_text("{oops")
    storage = ToolStorage(echoai_folder)
    storage.rebuild_index()
    assert sorted(storage.read_index()["tools"]) == CORPUS_IDS
    assert [p.read_text() for p in echoai_folder.glob("tool_index.json.corrupt-*")] == ["{oops"]


def test_a_write_by_another_writer_is_noticed(tmp_path: Path) -> None:
    mine, theirs = ToolStorage(tmp_path), ToolStorage(tmp_path)
    mine.load_all()
    mine.save(ToolDef.model_validate(tool_dict("Mine")))
    assert mine.changed_elsewhere() is False
    theirs.save(ToolDef.model_validate(tool_dict("Theirs")))
    assert mine.changed_elsewhere() is True
    mine.load_all()
    assert mine.changed_elsewhere() is False


def test_a_write_between_our_writes_is_still_noticed(tmp_path: Path) -> None:
    mine, theirs = ToolStorage(tmp_path), ToolStorage(tmp_path)
    mine.load_all()
    theirs.save(ToolDef.model_validate(tool_dict("Theirs")))
    mine.save(ToolDef.model_validate(tool_dict("Mine")))
    assert mine.changed_elsewhere() is True


def test_a_storage_folder_that_cannot_exist_is_a_storage_error(tmp_path: Path) -> None:
    a_file = tmp_path / "plain.txt"
    a_file.write_text("x")
    with pytest.raises(ToolStorageError, match=r"plain.txt/tools' cannot be created"):
        ToolStorage(a_file / "tools")
    with pytest.raises(ToolStorageError, match="is not a folder"):
        ToolStorage(a_file)


def test_a_temp_file_left_by_a_dead_writer_is_invisible_to_echoais_glob(tmp_path: Path) -> None:
    fd, name = tempfile.mkstemp(
        prefix=".tmp-", suffix=".partial", dir=tmp_path
    )  # as atomic_write_json names them
    os.close(fd)
    storage = ToolStorage(tmp_path)
    storage.save(ToolDef.model_validate(tool_dict("Sample")))
    # EchoAI's load_all is `storage_dir.glob("*.json")`, and pathlib's glob matches dot files
    assert sorted(p.name for p in tmp_path.glob("*.json")) == ["tool_index.json", "tool_sample.json"]
    old = time.time() - 3600
    os.utime(name, (old, old))
    ToolRegistry(storage_dir=tmp_path)  # loading sees the stale temp file and cleans up under the lock
    assert not Path(name).exists()
    assert storage.load_all() == ([storage.load("tool_sample")], []) and storage.stale_temp_files == 0
