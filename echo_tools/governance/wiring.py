"""Where a process keeps approvals and quota counts: beside its run history, so other processes share them.

An embedded history (`<storage>/runs.sqlite`) gets a `SqliteApprovalStore` in the same file, so
`echo-tools approvals approve` decides what a paused `echo-tools run` asked; quota counts stay in memory.
A PostgreSQL history gets `PgApprovalStore` and `PgQuotaCounter` on its pool: every replica sees every
approval and counts every call against the same windows.
"""

from __future__ import annotations

from typing import Any

__all__ = ["governance_stores"]


def governance_stores(history: Any) -> dict[str, Any]:
    """`ToolExecutor` keyword arguments (`approvals`, `quota_counter`) for a process whose run history is
    `history` (a `RunHistory`, a `PgRunHistory`, or None: everything in memory)."""
    if history is None:
        return {}
    database = getattr(history, "db", None)
    if database is not None and hasattr(database, "pool"):
        from echo_tools.governance.pg import PgApprovalStore, PgQuotaCounter

        return {"approvals": PgApprovalStore(database), "quota_counter": PgQuotaCounter(database)}
    path = getattr(history, "path", None)
    if path is None:
        return {}
    from echo_tools.governance.approvals import SqliteApprovalStore

    return {"approvals": SqliteApprovalStore(path)}
