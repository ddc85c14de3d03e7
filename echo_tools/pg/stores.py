"""Small tables beside the catalogue: MCP server configs and opaque credential blobs.

`PgMcpConfigStore` keeps each server's config exactly as given (the `mcpServers` shape, `${ENV}`
references unresolved), one row per server. `PgSecretStore` is a key-value table of bytes for the
credential store, which encrypts before it writes: this table never sees a secret in the clear.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from echo_tools.errors import ToolConfigError, ToolStorageError
from echo_tools.pg.database import PgDatabase

MAX_NAME_CHARS = 200


def _check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise ToolStorageError(
            f"{what} name must be a non-empty string of at most {MAX_NAME_CHARS} characters, got {name!r:.80}"
        )
    return name


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
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO echo_mcp_servers (name, config, updated) VALUES (%s, %s, now())"
                " ON CONFLICT (name) DO UPDATE SET config = excluded.config, updated = excluded.updated",
                (name, Jsonb(config)),
            )

    def remove(self, name: str) -> bool:
        """Forget one server's config; False when it was not stored."""
        _check_name(name, "MCP server")
        with self.db.transaction() as conn:
            return bool(conn.execute("DELETE FROM echo_mcp_servers WHERE name = %s", (name,)).rowcount)


class PgSecretStore:
    """Opaque byte blobs by name in `echo_secrets`: the storage under the credential store."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    def get(self, name: str) -> bytes | None:
        """The blob stored under `name`, or None."""
        _check_name(name, "secret")
        with self.db.connection() as conn:
            row = conn.execute("SELECT value FROM echo_secrets WHERE name = %s", (name,)).fetchone()
        return bytes(row[0]) if row else None

    def put(self, name: str, value: bytes) -> None:
        """Store (or replace) the blob under `name`."""
        _check_name(name, "secret")
        if not isinstance(value, bytes | bytearray | memoryview):
            raise ToolStorageError(f"secret {name!r}: value must be bytes, got {type(value).__name__}")
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO echo_secrets (name, value, updated) VALUES (%s, %s, now())"
                " ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated = excluded.updated",
                (name, bytes(value)),
            )

    def delete(self, name: str) -> bool:
        """Forget the blob under `name`; False when there was none."""
        _check_name(name, "secret")
        with self.db.transaction() as conn:
            return bool(conn.execute("DELETE FROM echo_secrets WHERE name = %s", (name,)).rowcount)

    def names(self) -> list[str]:
        """Every stored name, sorted."""
        with self.db.connection() as conn:
            return [r[0] for r in conn.execute("SELECT name FROM echo_secrets ORDER BY name")]
