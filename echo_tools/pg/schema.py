"""The PostgreSQL schema of echo-tools, as numbered migrations applied under an advisory lock.

Each migration moves the schema one version up; a new one is appended, never edited. They run in one
transaction holding `pg_advisory_xact_lock`, so replicas starting at once migrate once and none sees a
half-made schema. `echo_schema_version` records the versions applied.
"""

from __future__ import annotations

from typing import Any

import psycopg

from echo_tools.errors import ToolStorageError
from echo_tools.history.queries import events_table_sql, runs_table_sql

# pg_advisory_xact_lock key: "echotool" in ASCII, so it does not collide with another application's lock
MIGRATION_LOCK = 0x6563686F746F6F6C

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        # the catalogue: one row per tool, the tool's definition as EchoAI stores it
        """CREATE TABLE echo_tools (
            tool_id TEXT PRIMARY KEY,
            name TEXT NOT NULL,
            body JSONB NOT NULL,
            saved_at TIMESTAMPTZ NOT NULL DEFAULT now()
        )""",
        # every key a tool is found by (its id, case-folded name, slug): the primary key makes two
        # replicas racing for one name fail in the database, not in a check either can miss
        """CREATE TABLE echo_tool_keys (
            key TEXT PRIMARY KEY,
            tool_id TEXT NOT NULL REFERENCES echo_tools (tool_id) ON DELETE CASCADE
        )""",
        "CREATE INDEX echo_tool_keys_tool ON echo_tool_keys (tool_id)",
        # bumped by every catalogue write in its transaction: the change counter replicas compare
        """CREATE TABLE echo_catalogue (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            version BIGINT NOT NULL
        )""",
        "INSERT INTO echo_catalogue (id, version) VALUES (1, 0)",
        """CREATE TABLE echo_mcp_servers (
            name TEXT PRIMARY KEY,
            config JSONB NOT NULL,
            updated TIMESTAMPTZ NOT NULL DEFAULT now()
        )""",
        # opaque blobs (the credential store encrypts before it writes)
        """CREATE TABLE echo_secrets (
            name TEXT PRIMARY KEY,
            value BYTEA NOT NULL,
            updated TIMESTAMPTZ NOT NULL DEFAULT now()
        )""",
    ),
    (
        *events_table_sql("echo_events", "BIGSERIAL PRIMARY KEY"),
        runs_table_sql("echo_runs"),
    ),
    (
        # the credential store's document as one row per credential (its `{type, secret, hosts}` entry,
        # the secret a Fernet token), so replicas setting different credentials at once lose none
        """CREATE TABLE echo_credentials (
            store TEXT NOT NULL,
            name TEXT NOT NULL,
            entry JSONB NOT NULL,
            updated TIMESTAMPTZ NOT NULL DEFAULT now(),
            PRIMARY KEY (store, name)
        )""",
        # a store kept as one blob moves into rows; a damaged blob stays, for the credential store to report
        """DO $$ BEGIN
            INSERT INTO echo_credentials (store, name, entry)
                SELECT s.name, c.key, c.value FROM echo_secrets s,
                    jsonb_each(convert_from(s.value, 'UTF8')::jsonb -> 'credentials') c
                WHERE s.name = 'credentials.enc';
            DELETE FROM echo_secrets WHERE name = 'credentials.enc';
        EXCEPTION WHEN others THEN NULL;
        END $$""",
    ),
    (
        # approvals (echo_tools.governance.approvals): every status change is one conditional UPDATE
        """CREATE TABLE echo_approvals (
            approval_id TEXT PRIMARY KEY,
            status TEXT NOT NULL,
            run_id TEXT,
            created TEXT NOT NULL,
            record TEXT NOT NULL
        )""",
        "CREATE INDEX echo_approvals_status ON echo_approvals (status, created)",
        # quotas (echo_tools.governance.quotas): the calls counted inside each key's sliding window
        "CREATE TABLE echo_quota_hits (key TEXT NOT NULL, at DOUBLE PRECISION NOT NULL)",
        "CREATE INDEX echo_quota_hits_key ON echo_quota_hits (key, at)",
        # one call counted, or the seconds until one fits: one round trip, serialised per key
        """CREATE FUNCTION echo_quota_take(k TEXT, lim INTEGER, per_s DOUBLE PRECISION)
        RETURNS DOUBLE PRECISION LANGUAGE plpgsql AS $$
        DECLARE
            now_s DOUBLE PRECISION := extract(epoch FROM clock_timestamp());
            n INTEGER;
            oldest DOUBLE PRECISION;
        BEGIN
            -- a count lost to a crash of the server costs a call or two of quota, not data: no disk wait
            PERFORM set_config('synchronous_commit', 'off', true);
            PERFORM pg_advisory_xact_lock(hashtextextended(k, 0));
            DELETE FROM echo_quota_hits WHERE key = k AND at <= now_s - per_s;
            SELECT count(*), min(at) INTO n, oldest FROM echo_quota_hits WHERE key = k;
            IF n >= lim THEN
                RETURN greatest(oldest + per_s - now_s, 0.001);
            END IF;
            INSERT INTO echo_quota_hits (key, at) VALUES (k, now_s);
            RETURN 0;
        END $$""",
    ),
    (
        # an approval's owner and expiry as columns (listings filter before they limit), and the key that
        # seals the scopes approvals and paused runs keep when ECHO_TOOLS_SECRET_KEY is not set
        "ALTER TABLE echo_approvals ADD COLUMN owner TEXT",
        "ALTER TABLE echo_approvals ADD COLUMN expires TEXT",
        "UPDATE echo_approvals SET owner = record::jsonb ->> 'owner' WHERE owner IS NULL",
        "CREATE INDEX echo_approvals_pending ON echo_approvals (status, owner, created)",
        "CREATE TABLE echo_keys (name TEXT PRIMARY KEY, value BYTEA NOT NULL)",
    ),
)

SCHEMA_VERSION = len(MIGRATIONS)


def migrate_schema(conn: psycopg.Connection[Any], where: str) -> int:
    """Bring the database to `SCHEMA_VERSION`; returns how many migrations this call applied.

    Raises:
        ToolStorageError: the database holds a newer schema than this echo-tools knows, or a migration
            failed (nothing of it is kept).
    """
    applied = 0
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS echo_schema_version ("
                " version INTEGER PRIMARY KEY, applied TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
            row = conn.execute("SELECT COALESCE(MAX(version), 0) FROM echo_schema_version").fetchone()
            current = int(row[0]) if row else 0
            if current > SCHEMA_VERSION:
                raise ToolStorageError(
                    f"PostgreSQL {where} has echo-tools schema version {current}, newer than this "
                    f"echo-tools knows ({SCHEMA_VERSION}); upgrade echo-tools"
                )
            for version, statements in enumerate(MIGRATIONS[current:], start=current + 1):
                for statement in statements:
                    conn.execute(statement)  # type: ignore[arg-type]
                conn.execute("INSERT INTO echo_schema_version (version) VALUES (%s)", (version,))
                applied += 1
    except psycopg.errors.InsufficientPrivilege as exc:
        raise ToolStorageError(f"PostgreSQL {where}: the user may not create the tables: {exc}") from exc
    return applied


def schema_versions(conn: psycopg.Connection[Any]) -> list[int]:
    """The migration versions recorded, oldest first (each appears once)."""
    return [int(r[0]) for r in conn.execute("SELECT version FROM echo_schema_version ORDER BY version")]
