"""PostgreSQL for several replicas: the catalogue, MCP configs, credentials, run history, checkpoints.

Needs the `postgres` extra (`pip install 'echo-tools[postgres]'`: psycopg 3 with its pool, and
`langgraph-checkpoint-postgres`). One `PgDatabase` (a pool) can be shared by every store of a process.
Names are imported on first use, so `echo_tools.pg.wiring.database_url` works without the extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo_tools.pg.database import PgDatabase, describe, redact
    from echo_tools.pg.history import PgRunHistory
    from echo_tools.pg.stores import PgMcpConfigStore, PgSecretStore
    from echo_tools.pg.tool_store import PgToolStorage
    from echo_tools.pg.transfer import Transfer, is_database_url, json_to_postgres, migrate, postgres_to_json
    from echo_tools.pg.wiring import DATABASE_URL_ENV, PgStores, attach, database_url, open_stores

_HOMES = {
    "DATABASE_URL_ENV": "wiring",
    "PgDatabase": "database",
    "PgMcpConfigStore": "stores",
    "PgRunHistory": "history",
    "PgSecretStore": "stores",
    "PgStores": "wiring",
    "PgToolStorage": "tool_store",
    "Transfer": "transfer",
    "attach": "wiring",
    "database_url": "wiring",
    "describe": "database",
    "is_database_url": "transfer",
    "json_to_postgres": "transfer",
    "migrate": "transfer",
    "open_stores": "wiring",
    "postgres_to_json": "transfer",
    "redact": "database",
}

__all__ = [
    "DATABASE_URL_ENV",
    "PgDatabase",
    "PgMcpConfigStore",
    "PgRunHistory",
    "PgSecretStore",
    "PgStores",
    "PgToolStorage",
    "Transfer",
    "attach",
    "database_url",
    "describe",
    "is_database_url",
    "json_to_postgres",
    "migrate",
    "open_stores",
    "postgres_to_json",
    "redact",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'echo_tools.pg' has no attribute {name!r}")
    return getattr(importlib.import_module(f"echo_tools.pg.{home}"), name)
