"""The history of runs, kept in SQLite (`<storage>/runs.sqlite`): tool events, runs, and checkpoints.

`RunHistory` is an event sink (a callable taking a `ToolEvent`) and the reader behind
`GET /tools/events/history` and `echo-tools events --run RUN_ID`. Events are kept oldest first, with
retention (`prune(days=...)`) so the table does not grow without end. It also records each workflow run
(its source and status) and hands out LangGraph's `SqliteSaver` on the same file, so a run paused at a
HITL node can be resumed from another process. The schema is versioned: a `schema_version` table records
the migrations applied. Events are written in batches by one thread (`EventWriter`); the queries live in
`echo_tools.history.queries`, shared with PostgreSQL's `PgRunHistory`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from echo_tools.errors import ToolStorageError
from echo_tools.events import ToolEvent
from echo_tools.history.queries import (
    DEFAULT_LIMIT,
    DEFAULT_RETENTION_DAYS,
    MAX_LIMIT,
    RUN_STATUSES,
    HistoryQueries,
    RunSummary,
    check_limit,
    check_since,
    events_table_sql,
    runs_table_sql,
)
from echo_tools.history.writer import EventWriter

__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_RETENTION_DAYS",
    "HISTORY_FILE",
    "MAX_LIMIT",
    "RUN_STATUSES",
    "RunHistory",
    "RunSummary",
    "check_limit",
    "check_since",
]

HISTORY_FILE = "runs.sqlite"

# Each migration moves the schema one version up; a new one is appended, never edited.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    events_table_sql("events", "INTEGER PRIMARY KEY AUTOINCREMENT"),
    (runs_table_sql("runs"),),
)


class RunHistory(HistoryQueries):
    """Tool events of every run, kept in SQLite; use it as an event sink and query it.

    Args:
        path: the database file (a name with a suffix, such as `runs.sqlite`), or a folder (the storage
            folder, made when missing), which then holds `runs.sqlite`.
    """

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        self.path = path if path.suffix and not path.is_dir() else path / HISTORY_FILE
        self._lock = threading.Lock()
        self.writer = EventWriter(self._write_events, str(self.path))
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # one connection shared under a lock: sinks run on worker threads, readers on others
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA busy_timeout=5000")
            # WAL with NORMAL: a commit waits for no disk sync (a power loss may drop the last events,
            # never corrupt the file); with FULL the history could not keep up with a busy server
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
        except sqlite3.Error as exc:
            raise ToolStorageError(f"cannot open the run history {str(self.path)!r}: {exc}") from exc

    def _migrate(self) -> None:
        with self._transaction() as db:
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = db.execute("SELECT MAX(version) FROM schema_version").fetchone()
            current = row[0] or 0
            if current > len(_MIGRATIONS):
                raise ToolStorageError(
                    f"the run history {str(self.path)!r} has schema version {current}, newer than this "
                    f"echo-tools knows ({len(_MIGRATIONS)}); upgrade echo-tools"
                )
            for version, statements in enumerate(_MIGRATIONS[current:], start=current + 1):
                for statement in statements:
                    db.execute(statement)
                db.execute("INSERT INTO schema_version (version) VALUES (?)", (version,))

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    def _change(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        with self._transaction() as db:
            return db.execute(sql, params).rowcount

    def _write_events(self, events: list[ToolEvent]) -> None:
        rows = [
            (e.event_id, e.type, e.timestamp, e.run_id, e.workflow_id, e.agent_id, e.tool_id, e.to_json())
            for e in events
        ]
        with self._transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO events (event_id, type, timestamp, run_id, workflow_id, agent_id,"
                " tool_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def checkpointer(self) -> Any:
        """LangGraph's `SqliteSaver` on this file (its own connection), for graphs whose runs must outlive
        the process."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(self.path, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        saver = SqliteSaver(conn)
        saver.setup()
        return saver

    def close(self) -> None:
        """Write the events still queued, then close the database connection."""
        self.writer.close()
        with self._lock:
            self._db.close()
