"""What `echo-tools serve --database-url` and `ECHO_TOOLS_DATABASE_URL` open: every store on one pool.

`open_stores(url)` checks the database (a clear error naming host and database), migrates it, prunes
the history past its retention, and returns the catalogue, the run history, MCP configs and the secret
table sharing one `PgDatabase`. `attach(registry, stores)` makes the registry reload when another
replica changes the catalogue.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from echo_tools.history import DEFAULT_RETENTION_DAYS

if TYPE_CHECKING:  # psycopg is imported by `open_stores`, so `database_url` works without the extra
    from echo_tools.pg.database import PgDatabase
    from echo_tools.pg.history import PgRunHistory
    from echo_tools.pg.stores import PgMcpConfigStore, PgSecretStore
    from echo_tools.pg.tool_store import PgToolStorage

DATABASE_URL_ENV = "ECHO_TOOLS_DATABASE_URL"


def database_url(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The database URL to use: the explicit one (`--database-url`), else `ECHO_TOOLS_DATABASE_URL`, else None."""
    if explicit:
        return explicit
    value = (os.environ if environ is None else environ).get(DATABASE_URL_ENV, "").strip()
    return value or None


@dataclass
class PgStores:
    """Every PostgreSQL-backed store of one process, on one pool."""

    db: PgDatabase
    storage: PgToolStorage
    history: PgRunHistory

    @property
    def mcp_configs(self) -> PgMcpConfigStore:
        return self.storage.mcp_configs

    @property
    def secrets(self) -> PgSecretStore:
        return self.storage.secrets

    def close(self) -> None:
        self.storage.close()
        self.history.close()
        self.db.close()


def open_stores(
    url: str, *, history_days: float = DEFAULT_RETENTION_DAYS, pool_size: int = 8, timeout: float = 5.0
) -> PgStores:
    """Open the database at `url` and every store on it; prunes events older than `history_days`.

    Raises:
        ToolStorageError: the URL is invalid or the database unreachable (the message names host and
            database), or its schema is newer than this echo-tools.
        ValueError: `history_days` is not positive (the message names it).
    """
    if isinstance(history_days, bool) or not isinstance(history_days, int | float) or history_days <= 0:
        raise ValueError(f"history_days must be a positive number of days, got {history_days!r}")
    from echo_tools.pg.database import PgDatabase
    from echo_tools.pg.history import PgRunHistory
    from echo_tools.pg.tool_store import PgToolStorage

    db = PgDatabase(url, pool_size=pool_size, timeout=timeout)
    try:
        stores = PgStores(db, PgToolStorage(db), PgRunHistory(db))
        stores.history.prune(days=history_days)
    except BaseException:
        db.close()
        raise
    return stores


def attach(registry: Any, stores: PgStores) -> None:
    """Reload `registry` whenever another replica changes the catalogue (LISTEN/NOTIFY)."""
    stores.storage.subscribe(registry.reload)
