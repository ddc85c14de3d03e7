"""Approvals and quota counts in PostgreSQL, shared by every replica on one database.

The tables come with the schema (`echo_tools.pg.schema`): `echo_approvals` (the SQL of
`SqlApprovalStore`) and `echo_quota_hits` with the function `echo_quota_take`, which counts a call or
says how long to wait in one statement, serialised per key by a transaction-scoped advisory lock.
"""

from __future__ import annotations

import os
import secrets
from typing import TYPE_CHECKING, Any

from echo_tools.gate import Seal
from echo_tools.gate.scope import SECRET_KEY_ENV
from echo_tools.governance.approvals import SqlApprovalStore
from echo_tools.pg.database import open_database

if TYPE_CHECKING:
    from echo_tools.pg.database import PgDatabase

__all__ = ["PgApprovalStore", "PgQuotaCounter", "database_seal"]


def database_seal(db: PgDatabase) -> Seal:
    """The seal of scopes kept in this database: from `ECHO_TOOLS_SECRET_KEY` when set, else a key kept in
    the database itself (made once, by whichever replica asks first), so every replica verifies alike."""
    if os.environ.get(SECRET_KEY_ENV):
        return Seal()
    with db.connection() as conn:
        conn.execute(
            "INSERT INTO echo_keys (name, value) VALUES ('scope_seal', %s) ON CONFLICT (name) DO NOTHING",
            (secrets.token_bytes(32),),
        )
        row = conn.execute("SELECT value FROM echo_keys WHERE name = 'scope_seal'").fetchone()
    assert row is not None
    return Seal(bytes(row[0]))


class PgApprovalStore(SqlApprovalStore):
    """Approvals in PostgreSQL: a decision or a claim on one replica is seen by every other at once.

    Args:
        database: a DSN (a pool is opened and closed with this object) or a shared `PgDatabase`.
    """

    def __init__(self, database: str | PgDatabase) -> None:
        self.db, self._owns_db = open_database(database)
        self.seal = database_seal(self.db)

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self.db.connection() as conn:
            return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]

    def _change(self, sql: str, params: tuple[Any, ...]) -> int:
        with self.db.connection() as conn:
            return conn.execute(sql, params).rowcount  # type: ignore[arg-type]

    def close(self) -> None:
        if self._owns_db:
            self.db.close()


class PgQuotaCounter:
    """Quota counts in PostgreSQL: replicas on one database count every call against one window.

    Args:
        database: a DSN (a pool is opened and closed with this object) or a shared `PgDatabase`.
    """

    blocking = True

    def __init__(self, database: str | PgDatabase) -> None:
        self.db, self._owns_db = open_database(database)

    def take(self, key: str, limit: int, per_s: float) -> float:
        with self.db.connection() as conn:
            row = conn.execute("SELECT echo_quota_take(%s, %s, %s)", (key, limit, per_s)).fetchone()
        return float(row[0]) if row else 0.0

    def give_back(self, key: str, limit: int, per_s: float) -> None:
        with self.db.connection() as conn:
            conn.execute(
                "DELETE FROM echo_quota_hits WHERE ctid = (SELECT ctid FROM echo_quota_hits WHERE key = %s "
                "ORDER BY at DESC LIMIT 1)",
                (key,),
            )

    def close(self) -> None:
        if self._owns_db:
            self.db.close()
