"""PgToolStorage against a real PostgreSQL server: the registry's storage contract, names, replicas."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.types.json import Jsonb

from echo_tools import ToolDef, ToolRegistry
from echo_tools.errors import ToolNameConflictError, ToolStorageError
from echo_tools.pg import PgDatabase, PgToolStorage
from tests.echo_tools._pg_support import tool_dict


@pytest.fixture
def storage(dsn: str) -> Iterator[PgToolStorage]:
    # the storage contract, without the LISTEN thread (its close waits up to its 0.25 s poll): the
    # listener has its own tests below and in test_pg_faults.py
    store = PgToolStorage(dsn, listen=False)
    yield store
    store.close()


def _tool(tool_id: str, name: str | None = None, **extra: object) -> ToolDef:
    return ToolDef.model_validate(tool_dict(tool_id, name, **extra))


def test_a_saved_tool_loads_back_equal_and_an_identical_save_writes_nothing(storage: PgToolStorage) -> None:
    tool = _tool("text_stats", tags=["text"])
    assert storage.save(tool) is True
    assert storage.save(tool) is False
    loaded = storage.load("text_stats")
    assert loaded is not None and loaded.to_storage_dict() == tool.to_storage_dict()
    assert storage.contains("text_stats") and not storage.contains("other")
    assert storage.location("text_stats") == "postgresql:echo_tools/text_stats"
    tools, problems = storage.load_all()
    assert [t.tool_id for t in tools] == ["text_stats"] and problems == []


def test_delete_removes_the_tool_and_frees_its_name(storage: PgToolStorage) -> None:
    storage.save(_tool("a_tool", "Shared Name"))
    assert storage.delete("a_tool") is True
    assert storage.delete("a_tool") is False
    assert storage.load("a_tool") is None
    assert storage.save(_tool("b_tool", "shared name")) is True


def test_a_name_that_differs_only_in_case_or_punctuation_is_refused_by_the_database(
    storage: PgToolStorage,
) -> None:
    storage.save(_tool("web_search", "Web Search"))
    with pytest.raises(ToolNameConflictError) as caught:
        storage.save(_tool("other_search", "web-search"))
    assert caught.value.field == "name" and caught.value.tool_id == "other_search"
    assert "'web_search'" in caught.value.message and "'web-search'" in caught.value.message
    assert storage.load("other_search") is None  # the refused save left nothing behind
    renamed = _tool("web_search", "Web Search v2")
    assert storage.save(renamed) is True  # a tool may change its own name


def test_a_bad_tool_id_is_refused_naming_it(storage: PgToolStorage) -> None:
    with pytest.raises(ToolStorageError) as caught:
        storage.load("../etc/passwd")
    assert "'../etc/passwd'" in caught.value.message and caught.value.tool_id == "../etc/passwd"


def test_a_row_that_is_not_a_valid_tool_is_reported_and_the_others_load(
    dsn: str, storage: PgToolStorage
) -> None:
    storage.save(_tool("good_tool"))
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO echo_tools (tool_id, name, body) VALUES ('broken', 'Broken', %s)",
            (Jsonb({"tool_id": "broken", "name": 5}),),
        )
        conn.execute(
            "INSERT INTO echo_tools (tool_id, name, body) VALUES ('moved', 'Moved', %s)",
            (Jsonb(tool_dict("elsewhere")),),
        )
    tools, problems = storage.load_all()
    assert [t.tool_id for t in tools] == ["good_tool"]
    by_path = {p.path: p.message for p in problems}
    assert "name" in by_path["postgresql:echo_tools/broken"]
    assert "'elsewhere'" in by_path["postgresql:echo_tools/moved"]
    assert storage.load("broken") is None
    registry = ToolRegistry(storage=storage, allowed_modules=["math"])  # type: ignore[arg-type]
    assert registry.get("good_tool") is not None
    assert {p.path for p in registry.problems()} == set(by_path)


def test_a_change_on_one_replica_reaches_the_others_registry_through_notify(dsn: str) -> None:
    first, second = PgToolStorage(dsn), PgToolStorage(dsn)
    try:
        writer = ToolRegistry(storage=first, allowed_modules=["math"])  # type: ignore[arg-type]
        reader = ToolRegistry(storage=second, allowed_modules=["math"])  # type: ignore[arg-type]
        heard = threading.Event()
        second.subscribe(reader.reload)
        second.subscribe(heard.set)
        writer.register(tool_dict("fresh_tool", "Fresh Tool"))
        assert heard.wait(10), "the second replica heard no NOTIFY"
        assert reader.get("fresh_tool") is not None
        assert not first.changed_elsewhere()  # our own write is not news to us
        heard.clear()  # before the write: its NOTIFY may arrive at once
        writer.delete("fresh_tool")
        assert heard.wait(10)
        assert reader.get("fresh_tool") is None
    finally:
        first.close()
        second.close()


def test_without_the_listener_a_miss_asks_the_database_for_changes(dsn: str) -> None:
    first, second = PgToolStorage(dsn, listen=False), PgToolStorage(dsn, listen=False)
    try:
        reader = ToolRegistry(storage=second, allowed_modules=["math"])  # type: ignore[arg-type]
        assert not second.changed_elsewhere()
        first.save(_tool("late_tool"))
        assert second.changed_elsewhere()
        assert reader.get("late_tool") is not None  # the miss reloaded
        assert not second.changed_elsewhere()
    finally:
        first.close()
        second.close()


def test_registering_on_two_replicas_at_once_keeps_one_owner_per_name(dsn: str) -> None:
    db = PgDatabase(dsn)
    stores = [PgToolStorage(db, listen=False) for _ in range(4)]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(stores))

    def race(i: int) -> None:
        barrier.wait()
        try:
            stores[i].save(_tool(f"racer_{i}", "The Racer"))
            outcomes.append("won")
        except ToolNameConflictError:
            outcomes.append("lost")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert sorted(outcomes) == ["lost", "lost", "lost", "won"]
        tools, _ = stores[0].load_all()
        assert [t.name for t in tools] == ["The Racer"]
    finally:
        db.close()


def test_mcp_configs_and_secrets_are_shared_tables(dsn: str, storage: PgToolStorage) -> None:
    storage.mcp_configs.put("files", {"command": "python", "args": ["-m", "server"], "env": {"K": "${K}"}})
    other = PgToolStorage(dsn, listen=False)
    try:
        assert other.mcp_configs.load() == {
            "files": {"command": "python", "args": ["-m", "server"], "env": {"K": "${K}"}}
        }
        assert other.mcp_configs.remove("files") is True and storage.mcp_configs.load() == {}
        storage.secrets.put("github", b"\x00opaque\xff")
        assert other.secrets.get("github") == b"\x00opaque\xff"
        assert other.secrets.names() == ["github"]
        assert other.secrets.delete("github") is True and storage.secrets.get("github") is None
        assert storage.secrets.delete("github") is False
    finally:
        other.close()


@pytest.mark.parametrize("name", ["", "x" * 201, 42, "a\x00b"])
def test_a_bad_secret_name_is_refused_naming_it(storage: PgToolStorage, name: object) -> None:
    with pytest.raises(ToolStorageError) as caught:
        storage.secrets.put(name, b"v")  # type: ignore[arg-type]
    assert "secret name" in caught.value.message and repr(name)[:20] in caught.value.message


def test_a_secret_value_that_is_not_bytes_is_refused_naming_it(storage: PgToolStorage) -> None:
    with pytest.raises(ToolStorageError) as caught:
        storage.secrets.put("token", "clear text")  # type: ignore[arg-type]
    assert "'token'" in caught.value.message and "str" in caught.value.message


def test_a_guard_that_refuses_leaves_the_stored_tool_as_it_was(storage: PgToolStorage) -> None:
    # the trust rules pass a guard: a remote caller may not replace or delete a tool of another source
    original = _tool("tool_guarded", "Guarded", description="the operator's")
    storage.save(original)

    def refuse(stored: ToolDef) -> None:
        raise PermissionError(f"{stored.tool_id} is read-only")

    with pytest.raises(PermissionError, match="tool_guarded is read-only"):
        storage.save(_tool("tool_guarded", "Guarded", description="a caller's"), replaces=refuse)
    with pytest.raises(PermissionError, match="tool_guarded is read-only"):
        storage.delete("tool_guarded", removes=refuse)
    kept = storage.load("tool_guarded")
    assert kept is not None and kept.description == "the operator's"
