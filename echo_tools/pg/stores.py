"""Small tables beside the catalogue: MCP server configs and the credential store's storage.

`PgMcpConfigStore` keeps each server's config exactly as given (the `mcpServers` shape, `${ENV}`
references unresolved), one row per server. `PgSecretStore` is a key-value table of bytes for the
credential store, which encrypts before it writes: no table sees a secret in the clear. The credential
store's own document (`credentials.enc`) is kept as one row per credential in `echo_credentials`: a write
applies only what changed since this thread read it, so two replicas setting different credentials at
once both keep theirs.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from echo_tools.errors import ToolConfigError, ToolStorageError
from echo_tools.pg.database import PgDatabase

MAX_NAME_CHARS = 200
CREDENTIAL_DOCUMENTS = frozenset({"credentials.enc"})  # `echo_tools.credentials.STORE_FILE`
CREDENTIAL_FORMAT = "echo-tools-credentials/1"  # `echo_tools.credentials.FORMAT`


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise ToolStorageError(
            f"{what} name must be a non-empty string of at most {MAX_NAME_CHARS} characters, got {name!r:.80}"
        )
    return name


def _upsert(db: PgDatabase, table: str, column: str, name: str, value: Any) -> None:
    # store (or replace) the row `name` of a small `(name, <column>, updated)` table
    query = sql.SQL(
        "INSERT INTO {table} (name, {column}, updated) VALUES (%s, %s, now())"
        " ON CONFLICT (name) DO UPDATE SET {column} = excluded.{column}, updated = excluded.updated"
    ).format(table=sql.Identifier(table), column=sql.Identifier(column))
    with db.transaction() as conn:
        conn.execute(query, (name, value))


class PgMcpConfigStore:
    """MCP server configs in `echo_mcp_servers`, shared by every replica."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def load(self) -> dict[str, dict[str, Any]]:
        """Every stored config by server name (the `mcpServers` object of `mcp_servers.json`)."""
        with self.db.connection() as conn:
            rows = conn.execute("SELECT name, config FROM echo_mcp_servers ORDER BY name").fetchall()
        return {name: config for name, config in rows}

    def put(self, name: str, config: dict[str, Any]) -> None:
        """Store (or replace) one server's config."""
        _check_name(name, "MCP server")
        if not isinstance(config, dict):
            raise ToolConfigError(
                f"MCP server {name!r}: config must be an object, got {type(config).__name__}", field="config"
            )
        _upsert(self.db, "echo_mcp_servers", "config", name, Jsonb(config))

    def remove(self, name: str) -> bool:
        """Forget one server's config; False when it was not stored."""
        _check_name(name, "MCP server")
        with self.db.transaction() as conn:
            return bool(conn.execute("DELETE FROM echo_mcp_servers WHERE name = %s", (name,)).rowcount)


class PgSecretStore:
    """Opaque byte blobs by name in `echo_secrets`: the storage under the credential store."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db
        self._read = threading.local()  # per document: the credential entries this thread last read

    def get(self, name: str) -> bytes | None:
        """The blob stored under `name`, or None."""
        _check_name(name, "secret")
        if name in CREDENTIAL_DOCUMENTS:
            return self._get_credentials(name)
        with self.db.connection() as conn:
            row = conn.execute("SELECT value FROM echo_secrets WHERE name = %s", (name,)).fetchone()
        return bytes(row[0]) if row else None

    def put(self, name: str, value: bytes) -> None:
        """Store (or replace) the blob under `name`."""
        _check_name(name, "secret")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise ToolStorageError(f"secret {name!r}: value must be bytes, got {type(value).__name__}")
        if name in CREDENTIAL_DOCUMENTS:
            self._put_credentials(name, bytes(value))
            return
        _upsert(self.db, "echo_secrets", "value", name, bytes(value))

    def delete(self, name: str) -> bool:
        """Forget the blob under `name`; False when there was none."""
        _check_name(name, "secret")
        with self.db.transaction() as conn:
            if name in CREDENTIAL_DOCUMENTS:
                sql = "DELETE FROM echo_credentials WHERE store = %s"
                return bool(conn.execute(sql, (name,)).rowcount)
            return bool(conn.execute("DELETE FROM echo_secrets WHERE name = %s", (name,)).rowcount)

    def names(self) -> list[str]:
        """Every stored name, sorted."""
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT name FROM echo_secrets UNION SELECT DISTINCT store FROM echo_credentials ORDER BY 1"
            )
            return [r[0] for r in rows]

    # -- the credential store's document, one row per credential -------------------------------------

    def _get_credentials(self, store: str) -> bytes | None:
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT name, entry FROM echo_credentials WHERE store = %s ORDER BY name", (store,)
            ).fetchall()
        entries = {name: entry for name, entry in rows}
        self._last_read()[store] = entries
        if not entries:
            return None
        return json.dumps({"format": CREDENTIAL_FORMAT, "credentials": entries}).encode("utf-8")

    def _put_credentials(self, store: str, value: bytes) -> None:
        """Write what differs from the entries this thread last read: the rows of credentials set or
        changed, the deletion of those removed; rows other writers changed meanwhile stay theirs."""
        try:
            document = json.loads(value)
            entries = document["credentials"]
            if not isinstance(entries, dict):
                raise TypeError("credentials is not an object")
        except (ValueError, TypeError, KeyError) as exc:
            raise ToolStorageError(f"secret {store!r}: not a credential store document ({exc})") from exc
        before = self._last_read().get(store, {})
        with self.db.transaction() as conn:
            for name, entry in entries.items():
                if before.get(name) != entry:
                    conn.execute(
                        "INSERT INTO echo_credentials (store, name, entry, updated) VALUES (%s, %s, %s, now())"
                        " ON CONFLICT (store, name) DO UPDATE SET entry = excluded.entry, updated = now()",
                        (store, name, Jsonb(entry)),
                    )
            for name in before.keys() - entries.keys():
                conn.execute("DELETE FROM echo_credentials WHERE store = %s AND name = %s", (store, name))
        self._last_read()[store] = dict(entries)

    def _last_read(self) -> dict[str, dict[str, Any]]:
        seen = getattr(self._read, "entries", None)
        if seen is None:
            seen = self._read.entries = {}
        return seen
