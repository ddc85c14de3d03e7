"""Credentials on PostgreSQL are kept one row per credential: replicas setting different credentials at
once lose none, a removal on one is seen by the others, and a store kept as one blob moves into rows."""

from __future__ import annotations

import asyncio
import json

import psycopg
import pytest
from cryptography.fernet import Fernet

from echo_tools.credentials import CredentialStore
from echo_tools.errors import ToolStorageError
from echo_tools.pg import PgDatabase
from echo_tools.pg.schema import MIGRATIONS, SCHEMA_VERSION, schema_versions
from echo_tools.pg.stores import PgSecretStore
from tests.echo_tools._pg_support import spawn


def _bearer(store: CredentialStore, name: str) -> str:
    """The Authorization header the stored credential gives a request (it decrypts)."""
    applied = asyncio.run(store.apply(name, "https://api.example.com/x"))
    return applied.headers["Authorization"]


def test_three_writer_processes_setting_credentials_at_once_lose_none(dsn: str, key: str) -> None:
    PgDatabase(dsn).close()  # migrated once up front, so the children race on writes only
    children = [spawn("credentials", dsn, f"w{i}", "15") for i in range(3)]
    results = [child.communicate(timeout=180) for child in children]
    assert [c.returncode for c in children] == [0, 0, 0], [err for _, err in results]
    db = PgDatabase(dsn)
    try:
        store = CredentialStore(secrets=PgSecretStore(db))
        names = {entry["name"] for entry in store.list()}
        assert names == {f"w{i}_{n}" for i in range(3) for n in range(15)}
        assert _bearer(store, "w2_14") == "Bearer token-w2-14"
        with psycopg.connect(dsn) as conn:
            rows = conn.execute("SELECT name, entry::text FROM echo_credentials").fetchall()
        assert len(rows) == 45 and not any("token-" in entry for _, entry in rows)  # encrypted at rest
    finally:
        db.close()


def test_a_removal_on_one_replica_keeps_what_another_set_meanwhile(dsn: str, key: str) -> None:
    one, two = PgDatabase(dsn), PgDatabase(dsn)
    try:
        first, second = (
            CredentialStore(secrets=PgSecretStore(one)),
            CredentialStore(secrets=PgSecretStore(two)),
        )
        first.set("old", {"type": "bearer", "token": "a"})
        assert [e["name"] for e in second.list()] == ["old"]  # the second replica read the store
        first.set("new", {"type": "bearer", "token": "b"})
        assert second.remove("old") is True  # its last read lacks "new": "new" must survive all the same
        assert [e["name"] for e in first.list()] == ["new"]
    finally:
        one.close()
        two.close()


def test_a_store_kept_as_one_blob_moves_into_rows(dsn: str, key: str) -> None:
    token = Fernet(key.encode()).encrypt(json.dumps({"type": "bearer", "token": "t"}).encode()).decode()
    document = {
        "format": "echo-tools-credentials/1",
        "credentials": {"crm": {"type": "bearer", "secret": token}},
    }
    with psycopg.connect(dsn, autocommit=True) as conn:  # a database left at schema version 2
        conn.execute("CREATE TABLE echo_schema_version (version INTEGER PRIMARY KEY, applied TIMESTAMPTZ)")
        for version, statements in enumerate(MIGRATIONS[:2], start=1):
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]
            conn.execute("INSERT INTO echo_schema_version (version) VALUES (%s)", (version,))
        conn.execute(
            "INSERT INTO echo_secrets (name, value) VALUES ('credentials.enc', %s)",
            (json.dumps(document).encode(),),
        )
    db = PgDatabase(dsn)
    try:
        with db.connection() as conn:
            assert schema_versions(conn) == list(range(1, SCHEMA_VERSION + 1))
            assert conn.execute("SELECT count(*) FROM echo_secrets").fetchone() == (0,)
        store = CredentialStore(secrets=PgSecretStore(db))
        assert store.list() == [{"name": "crm", "type": "bearer"}]
        assert _bearer(store, "crm") == "Bearer t"
    finally:
        db.close()


def test_a_credential_document_that_is_not_one_is_refused_naming_it(dsn: str) -> None:
    db = PgDatabase(dsn)
    try:
        with pytest.raises(
            ToolStorageError, match=r"secret 'credentials.enc': not a credential store document"
        ):
            PgSecretStore(db).put("credentials.enc", b"not json")
        assert PgSecretStore(db).names() == []
    finally:
        db.close()
