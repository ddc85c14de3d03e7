"""Faults with a real PostgreSQL server: bad DSNs, a restart mid-run, concurrent writer processes."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import psycopg
import pytest

from echo_tools import ToolDef
from echo_tools.errors import ToolStorageError
from echo_tools.events import ToolEvent
from echo_tools.pg import PgDatabase, PgRunHistory, PgToolStorage
from echo_tools.pg.schema import SCHEMA_VERSION, schema_versions
from tests.echo_tools._pg_support import (
    PgServer,
    free_port,
    spawn,
    tool_dict,
    wait_until,
)


def test_a_database_that_does_not_exist_is_named_with_its_host(pg_server: PgServer) -> None:
    with pytest.raises(ToolStorageError) as caught:
        PgDatabase(pg_server.dsn("no_such_db"))
    message = caught.value.message
    assert "'no_such_db'" in message and "127.0.0.1" in message and str(pg_server.port) in message
    assert "does not exist" in message


def test_an_unreachable_server_is_named_and_the_password_never_shown() -> None:
    port = free_port()
    with pytest.raises(ToolStorageError) as caught:
        PgDatabase(f"postgresql://echo:s3cret-pw@127.0.0.1:{port}/catalogue", timeout=2)
    message = caught.value.message
    assert "'catalogue'" in message and f"host 127.0.0.1 port {port}" in message
    assert "s3cret-pw" not in message and "Traceback" not in message


@pytest.mark.parametrize("dsn", ["not a dsn", "", None])
def test_a_malformed_database_url_is_refused_naming_it(dsn: object) -> None:
    with pytest.raises(ToolStorageError) as caught:
        PgDatabase(dsn)  # type: ignore[arg-type]
    assert "database URL" in caught.value.message and repr(dsn) in caught.value.message


def test_an_unparsable_database_url_is_named_with_its_password_masked() -> None:
    with pytest.raises(ToolStorageError) as caught:
        PgDatabase("postgresql://echo:hunter2@db:5432/echo?sslmode=bogus extra")
    assert "hunter2" not in caught.value.message and "postgresql://echo:***@db" in caught.value.message


def test_a_schema_newer_than_this_version_is_refused_naming_both_versions(dsn: str) -> None:
    PgDatabase(dsn).close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO echo_schema_version (version) VALUES (99)")
    with pytest.raises(ToolStorageError) as caught:
        PgDatabase(dsn)
    assert "version 99" in caught.value.message and f"({SCHEMA_VERSION})" in caught.value.message


def test_replicas_starting_at_once_migrate_once(dsn: str) -> None:
    children = [spawn("open", dsn) for _ in range(3)]
    results = [child.communicate(timeout=120) for child in children]
    assert [c.returncode for c in children] == [0, 0, 0], [err for _, err in results]
    with psycopg.connect(dsn) as conn:
        assert schema_versions(conn) == list(range(1, SCHEMA_VERSION + 1))


def test_three_writer_processes_lose_nothing_and_one_wins_the_contested_name(dsn: str) -> None:
    PgDatabase(dsn).close()  # migrated once up front, so the children race on writes only
    children = [spawn("writer", dsn, f"w{i}", "25") for i in range(3)]
    results = [child.communicate(timeout=180) for child in children]
    assert [c.returncode for c in children] == [0, 0, 0], [err for _, err in results]
    assert sorted(out.strip() for out, _ in results) == ["lost", "lost", "won"]
    storage = PgToolStorage(dsn, listen=False)
    try:
        tools, problems = storage.load_all()
        assert problems == []
        ids = {t.tool_id for t in tools}
        assert {f"w{i}_{n}" for i in range(3) for n in range(25)} <= ids
        assert sum(t.name == "Contested" for t in tools) == 1 and len(ids) == 76
        assert storage.signature() == 76  # every write bumped the change counter once
    finally:
        storage.close()


@pytest.fixture
def private_server() -> Iterator[PgServer]:
    server = PgServer().start()  # restarted by the test: not the shared one
    yield server
    server.stop()


def test_a_restart_mid_run_fails_the_calls_that_need_it_and_the_next_ones_succeed(
    private_server: PgServer,
) -> None:
    dsn = private_server.new_database()
    db = PgDatabase(dsn, timeout=0.5)  # each call made while the server is away fails after this
    storage = PgToolStorage(db)
    history = PgRunHistory(db)
    watcher = PgToolStorage(dsn)
    heard = threading.Event()
    try:
        storage.save(ToolDef.model_validate(tool_dict("before")))
        history(ToolEvent(type="tool.invoked", run_id="r1"))
        assert history.flush(10)
        storage.load_all()  # as the registry does at start
        private_server.halt()
        with pytest.raises(ToolStorageError) as caught:
            storage.save(ToolDef.model_validate(tool_dict("during")))
        assert "127.0.0.1" in caught.value.message and "unreachable" in caught.value.message
        history(ToolEvent(type="tool.invoked", run_id="r1"))  # queued: its batch fails, counted
        assert history.flush(30) and history.dropped == 1
        assert not storage.changed_elsewhere()  # the cached catalogue stays usable meanwhile
        private_server.resume()
        # the pool reconnects on its own schedule (backing off from its failed attempts): once it has
        wait_until(lambda: db.pool.get_stats()["pool_available"] > 0, 30, "the pool did not reconnect")
        assert storage.save(ToolDef.model_validate(tool_dict("after"))) is True
        history(ToolEvent(type="tool.completed", run_id="r1"))
        assert [t.tool_id for t in storage.load_all()[0]] == ["after", "before"]  # nothing half-written
        assert [e.type for e in history.events(run_id="r1")] == ["tool.invoked", "tool.completed"]
        assert watcher._listener is not None and watcher._listener.connected.wait(15)
        watcher.subscribe(heard.set)
        storage.delete("after")
        assert heard.wait(10), "the listener did not reconnect after the restart"
    finally:
        watcher.close()
        storage.close()
        history.close()
        db.close()
