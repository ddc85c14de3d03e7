"""The history of runs, kept in SQLite (`<storage>/runs.sqlite`): tool events, runs, and checkpoints.

`RunHistory` is an event sink (a callable taking a `ToolEvent`) and the reader behind
`GET /tools/events/history` and `echo-tools events --run RUN_ID`. Events are kept oldest first, with
retention (`prune(days=...)`) so the table does not grow without end. It also records each workflow run
(its source and status) and hands out LangGraph's `SqliteSaver` on the same file, so a run paused at a
HITL node can be resumed from another process. The schema is versioned: a `schema_version` table records
the migrations applied.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from echo_tools.errors import ToolStorageError
from echo_tools.events import ToolEvent

HISTORY_FILE = "runs.sqlite"
DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
DEFAULT_RETENTION_DAYS = 30

# Each migration moves the schema one version up; a new one is appended, never edited.
_MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE events (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            event_id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            timestamp TEXT NOT NULL,
            run_id TEXT,
            workflow_id TEXT,
            agent_id TEXT,
            tool_id TEXT,
            body TEXT NOT NULL
        )""",
        "CREATE INDEX events_run ON events (run_id, seq)",
        "CREATE INDEX events_tool ON events (tool_id, seq)",
        "CREATE INDEX events_agent ON events (agent_id, seq)",
        "CREATE INDEX events_time ON events (timestamp)",
    ),
    (
        # what a run needs to be resumed from another process: its source and where it stands
        """CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            workflow_id TEXT,
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            error TEXT,
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )""",
    ),
)

RUN_STATUSES = ("running", "interrupted", "completed", "failed")

_EVENT_FIELDS = frozenset(ToolEvent.__dataclass_fields__)


@dataclass(frozen=True)
class RunSummary:
    """One run as the history knows it: its ids, first and last event, and how its calls went."""

    run_id: str
    workflow_id: str | None
    started: str
    last_event: str
    calls: int
    failed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "workflow_id": self.workflow_id,
            "started": self.started,
            "last_event": self.last_event,
            "calls": self.calls,
            "failed": self.failed,
        }


def check_limit(limit: int) -> int:
    """`limit` when it is within 1..10,000, else `ValueError` naming it."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
    return limit


def check_since(since: str | None) -> str | None:
    """`since` normalised to the events' timestamp form (UTC, `Z`), or `ValueError` naming it."""
    if since is None:
        return None
    try:
        moment = datetime.fromisoformat(since.replace("Z", "+00:00"))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"since must be an ISO 8601 time such as 2026-01-31T12:00:00Z, got {since!r}"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class RunHistory:
    """Tool events of every run, kept in SQLite; use it as an event sink and query it.

    Args:
        path: the database file (a name with a suffix, such as `runs.sqlite`), or a folder (the storage
            folder, made when missing), which then holds `runs.sqlite`.
    """

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        self.path = path if path.suffix and not path.is_dir() else path / HISTORY_FILE
        self._lock = threading.Lock()
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

    def __call__(self, event: ToolEvent) -> None:
        """Keep one event (the sink interface)."""
        self.record(event)

    def record(self, event: ToolEvent) -> None:
        """Keep one event; an event already kept (same `event_id`) is not kept twice."""
        body = event.to_json()
        with self._transaction() as db:
            db.execute(
                "INSERT OR IGNORE INTO events (event_id, type, timestamp, run_id, workflow_id, agent_id,"
                " tool_id, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    event.event_id,
                    event.type,
                    event.timestamp,
                    event.run_id,
                    event.workflow_id,
                    event.agent_id,
                    event.tool_id,
                    body,
                ),
            )

    def events(
        self,
        *,
        run_id: str | None = None,
        tool_id: str | None = None,
        agent_id: str | None = None,
        since: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[ToolEvent]:
        """The kept events matching every filter given, oldest first, at most `limit` (1..10,000).

        Raises:
            ValueError: `limit` or `since` is out of range or malformed (the message names it).
        """
        check_limit(limit)
        since = check_since(since)
        clauses, params = [], []
        for column, value in (("run_id", run_id), ("tool_id", tool_id), ("agent_id", agent_id)):
            if value is not None:
                clauses.append(f"{column} = ?")
                params.append(value)
        if since is not None:
            clauses.append("timestamp >= ?")
            params.append(since)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            rows = self._db.execute(
                f"SELECT body FROM events {where} ORDER BY seq LIMIT ?", (*params, limit)
            ).fetchall()
        return [_event_from_json(body) for (body,) in rows]

    def runs(self, *, workflow_id: str | None = None, limit: int = DEFAULT_LIMIT) -> list[RunSummary]:
        """The runs with kept events, newest first, at most `limit`."""
        check_limit(limit)
        where, params = ("AND workflow_id = ?", [workflow_id]) if workflow_id is not None else ("", [])
        with self._lock:
            rows = self._db.execute(
                "SELECT run_id, MAX(workflow_id), MIN(timestamp), MAX(timestamp),"
                " SUM(type = 'tool.invoked'), SUM(type IN ('tool.failed', 'tool.timeout'))"
                f" FROM events WHERE run_id IS NOT NULL {where}"
                " GROUP BY run_id ORDER BY MAX(seq) DESC LIMIT ?",
                (*params, limit),
            ).fetchall()
        return [RunSummary(r[0], r[1], r[2], r[3], int(r[4] or 0), int(r[5] or 0)) for r in rows]

    def prune(
        self, *, days: float = DEFAULT_RETENTION_DAYS, now: Callable[[], datetime] | None = None
    ) -> int:
        """Forget events older than `days`; returns how many were removed."""
        if days <= 0:
            raise ValueError(f"days must be positive, got {days!r}")
        moment = (now() if now else datetime.now(UTC)) - timedelta(days=days)
        cutoff = moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        with self._transaction() as db:
            return db.execute("DELETE FROM events WHERE timestamp < ?", (cutoff,)).rowcount

    # -- runs ----------------------------------------------------------------------------------------

    def start_run(self, run_id: str, source: dict[str, Any], workflow_id: str | None = None) -> None:
        """Record a run as `running`, with the source it was compiled from (so it can be compiled again)."""
        now = _now()
        with self._transaction() as db:
            db.execute(
                "INSERT INTO runs (run_id, workflow_id, status, source, created, updated)"
                " VALUES (?, ?, 'running', ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET"
                " status = 'running', source = excluded.source, error = NULL, updated = excluded.updated",
                (run_id, workflow_id, json.dumps(source, ensure_ascii=False, default=str), now, now),
            )

    def set_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Move a recorded run to `status` (`running`, `interrupted`, `completed`, `failed`)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self._transaction() as db:
            db.execute(
                "UPDATE runs SET status = ?, error = ?, updated = ? WHERE run_id = ?",
                (status, error, _now(), run_id),
            )

    def claim_run(self, run_id: str, expected: str = "interrupted", status: str = "running") -> bool:
        """Move a run from `expected` to `status` in one step; False when it was not `expected` (another
        process claimed it first: two resumes of one paused run never both go ahead)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self._transaction() as db:
            moved = db.execute(
                "UPDATE runs SET status = ?, error = NULL, updated = ? WHERE run_id = ? AND status = ?",
                (status, _now(), run_id, expected),
            ).rowcount
        return bool(moved)

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The recorded run `{run_id, workflow_id, status, source, error, created, updated}`, or None."""
        with self._lock:
            row = self._db.execute(
                "SELECT run_id, workflow_id, status, source, error, created, updated FROM runs WHERE run_id = ?",
                (run_id,),
            ).fetchone()
        if row is None:
            return None
        keys = ("run_id", "workflow_id", "status", "source", "error", "created", "updated")
        record = dict(zip(keys, row, strict=True))
        record["source"] = json.loads(record["source"])
        return record

    def checkpointer(self) -> Any:
        """LangGraph's `SqliteSaver` on this file (its own connection), for graphs whose runs must outlive
        the process."""
        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(self.path, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=5000")
        saver = SqliteSaver(conn)
        saver.setup()
        return saver

    def count(self) -> int:
        """How many events are kept."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._db.close()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _event_from_json(body: str) -> ToolEvent:
    data = json.loads(body)
    return ToolEvent(**{k: v for k, v in data.items() if k in _EVENT_FIELDS})
