"""PostgreSQL for several replicas: the catalogue, MCP configs, credentials, run history, checkpoints.

Needs the `postgres` extra (`pip install 'echo-tools[postgres]'`: psycopg 3 with its pool, and
`langgraph-checkpoint-postgres`). One `PgDatabase` (a pool) can be shared by every store of a process.
"""

from echo_tools.pg.database import PgDatabase, describe, redact
from echo_tools.pg.history import PgRunHistory
from echo_tools.pg.stores import PgMcpConfigStore, PgSecretStore
from echo_tools.pg.tool_store import PgToolStorage
from echo_tools.pg.transfer import Transfer, is_database_url, json_to_postgres, migrate, postgres_to_json
from echo_tools.pg.wiring import DATABASE_URL_ENV, PgStores, attach, database_url, open_stores

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
