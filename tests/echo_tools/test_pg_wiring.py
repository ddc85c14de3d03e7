"""open_stores / attach: what the server opens for ECHO_TOOLS_DATABASE_URL, on a real PostgreSQL server."""

from __future__ import annotations

import threading

import pytest

from echo_tools import ToolRegistry
from echo_tools.errors import ToolStorageError
from echo_tools.events import ToolEvent
from echo_tools.pg.wiring import DATABASE_URL_ENV, attach, database_url, open_stores
from tests.echo_tools._pg_support import PgServer, tool_dict


def test_the_explicit_url_wins_over_the_environment() -> None:
    env = {DATABASE_URL_ENV: "postgresql://env/db"}
    assert database_url("postgresql://flag/db", env) == "postgresql://flag/db"
    assert database_url(None, env) == "postgresql://env/db"
    assert database_url(None, {DATABASE_URL_ENV: "  "}) is None


def test_three_replicas_share_one_catalogue_and_one_history(pg_server: PgServer) -> None:
    url = pg_server.new_database()
    replicas = [open_stores(url, history_days=7) for _ in range(3)]
    registries = [ToolRegistry(storage=r.storage, allowed_modules=["math"]) for r in replicas]  # type: ignore[arg-type]
    heard = [threading.Event() for _ in replicas]
    try:
        for replica, registry, event in zip(replicas, registries, heard, strict=True):
            attach(registry, replica)
            replica.storage.subscribe(event.set)
        registries[0].register(tool_dict("shared_tool", "Shared Tool"))
        assert heard[1].wait(10) and heard[2].wait(10)
        assert all(r.get("shared_tool") is not None for r in registries[1:])
        for i, replica in enumerate(replicas):
            replica.history(ToolEvent(type="tool.invoked", run_id="one-run", agent_id=f"replica{i}"))
            assert replica.history.flush(10)  # each replica writes in its own order; this test wants theirs
        agents = [e.agent_id for e in replicas[2].history.events(run_id="one-run")]
        assert agents == ["replica0", "replica1", "replica2"]
        replicas[1].secrets.put("api-key", b"sealed")
        assert replicas[0].secrets.get("api-key") == b"sealed"
    finally:
        for replica in replicas:
            replica.close()


@pytest.mark.parametrize("days", [0, -3, True, "30"])
def test_a_bad_retention_is_refused_naming_it(pg_server: PgServer, days: object) -> None:
    with pytest.raises(ValueError, match=f"history_days .*got {days!r}"):
        open_stores(pg_server.dsn(), history_days=days)  # type: ignore[arg-type]


def test_an_unreachable_url_fails_at_start_naming_the_database(pg_server: PgServer) -> None:
    with pytest.raises(ToolStorageError, match="'missing_db' on host 127.0.0.1"):
        open_stores(pg_server.dsn("missing_db"))


def test_the_url_is_read_without_the_postgres_extra_and_opening_says_what_to_install() -> None:
    import subprocess
    import sys

    from tests.echo_tools._pg_support import child_env

    code = (
        "import sys; sys.modules['psycopg'] = None\n"  # as on a machine without the extra
        "from echo_tools.pg.wiring import database_url, open_stores\n"
        "print(database_url(None, {'ECHO_TOOLS_DATABASE_URL': 'postgresql://h/d'}))\n"
        "try:\n    open_stores('postgresql://h/d')\nexcept ImportError as exc:\n    print('ImportError', exc.name)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=child_env(), timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["postgresql://h/d", "ImportError psycopg"]
