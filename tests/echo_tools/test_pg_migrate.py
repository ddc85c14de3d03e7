"""Copying a catalogue between a JSON store and a real PostgreSQL database, both ways."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from echo_tools import ToolDef
from echo_tools.errors import ToolStorageError
from echo_tools.pg import PgToolStorage, migrate
from echo_tools.storage import ToolStorage
from tests.echo_tools._pg_support import PgServer, child_env, tool_dict


def _json_store(folder: Path) -> ToolStorage:
    store = ToolStorage(folder)
    store.save(
        ToolDef.model_validate(tool_dict("alpha", tags=["a", "b"], metadata={"nested": {"x": [1, 2]}}))
    )
    store.save(ToolDef.model_validate(tool_dict("beta", "Beta Tool", timeout_ms=1234)))
    (folder / "mcp_servers.json").write_text(
        json.dumps({"mcpServers": {"files": {"command": "python", "env": {"TOKEN": "${TOKEN}"}}}})
    )
    (folder / "broken.json").write_text("{not json")
    return store


def test_a_json_store_goes_to_postgres_and_back_with_the_same_tools(tmp_path: Path, dsn: str) -> None:
    source = _json_store(tmp_path / "source")
    there = migrate(tmp_path / "source", dsn)
    assert sorted(there.written) == ["alpha", "beta"] and there.mcp_servers == ["files"]
    assert [Path(p.path).name for p in there.problems] == ["broken.json"]
    assert migrate(tmp_path / "source", dsn).unchanged == ["alpha", "beta"]  # a second copy writes nothing

    back = migrate(dsn, tmp_path / "back")
    assert sorted(back.written) == ["alpha", "beta"] and back.problems == []
    original = {t.tool_id: t.to_storage_dict() for t in source.load_all()[0]}
    returned = {t.tool_id: t.to_storage_dict() for t in ToolStorage(tmp_path / "back").load_all()[0]}
    assert returned == original
    stored = json.loads((tmp_path / "back" / "mcp_servers.json").read_text())
    assert stored == {"mcpServers": {"files": {"command": "python", "env": {"TOKEN": "${TOKEN}"}}}}

    pg = PgToolStorage(dsn, listen=False)
    try:
        assert {t.tool_id: t.to_storage_dict() for t in pg.load_all()[0]} == original
    finally:
        pg.close()


def test_a_name_clash_in_the_target_is_reported_and_the_rest_copied(tmp_path: Path, dsn: str) -> None:
    _json_store(tmp_path / "source")
    pg = PgToolStorage(dsn, listen=False)
    try:
        pg.save(ToolDef.model_validate(tool_dict("gamma", "beta tool")))
        report = migrate(tmp_path / "source", dsn)
    finally:
        pg.close()
    assert report.written == ["alpha"]
    clash = [p for p in report.problems if "beta.json" in p.path]
    assert clash and "'gamma'" in clash[0].message


@pytest.mark.parametrize(
    ("source", "target"),
    [("postgresql://a/b", "postgresql://c/d"), ("/tmp/one", "/tmp/two")],
)
def test_migrate_needs_one_folder_and_one_url_and_names_both(source: str, target: str) -> None:
    with pytest.raises(ToolStorageError) as caught:
        migrate(source, target)
    assert repr(source) in caught.value.message and repr(target) in caught.value.message


def test_a_missing_source_folder_is_named(tmp_path: Path, dsn: str) -> None:
    with pytest.raises(ToolStorageError, match="nowhere"):
        migrate(tmp_path / "nowhere", dsn)


def _module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "echo_tools.pg", *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )


def test_the_command_line_copies_a_store_and_reports_what_the_database_holds(
    tmp_path: Path, dsn: str
) -> None:
    _json_store(tmp_path / "source")
    copied = _module("migrate", str(tmp_path / "source"), dsn)
    assert copied.returncode == 1, copied.stderr  # broken.json is reported: a copy with problems says so
    assert sorted(json.loads(copied.stdout)["written"]) == ["alpha", "beta"]
    checked = _module("check", dsn)
    assert checked.returncode == 0, checked.stderr
    summary = json.loads(checked.stdout)
    assert (summary["tools"], summary["mcp_servers"], summary["events"]) == (2, ["files"], 0)
    pruned = _module("prune", dsn, "--days", "7")
    assert pruned.returncode == 0 and json.loads(pruned.stdout) == {"pruned": 0}


def test_the_command_line_names_an_unreachable_database_in_one_line(pg_server: PgServer) -> None:
    done = _module("check", pg_server.dsn("absent_db"))
    assert done.returncode == 2
    assert "'absent_db'" in done.stderr and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
