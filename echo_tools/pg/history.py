"""PgRunHistory: `RunHistory` on PostgreSQL, one event history for every replica on the database.

Same public API as `echo_tools.history.RunHistory` (an event sink; `events`, `runs`, `prune`,
`start_run`, `set_status`, `run`, `checkpointer`, `count`, `close`). Each replica's events go to one
table, indexed by run, tool, agent and time; `follow(callback)` hears the events other replicas record
(LISTEN/NOTIFY), which is what lets `/tools/events` on one replica stream every replica's calls.
`checkpointer()` is LangGraph's `PostgresSaver`, so a run paused on one replica resumes on another.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from echo_tools.events import ToolEvent
from echo_tools.history import (
    DEFAULT_LIMIT,
    DEFAULT_RETENTION_DAYS,
    RUN_STATUSES,
    RunSummary,
    _event_from_json,
    _now,
    check_limit,
    check_since,
)
from echo_tools.pg.database import PgDatabase, open_database
from echo_tools.pg.listener import PgListener

CHANNEL = "echo_events"
_NOTIFY_MAX_BYTES = 7000  # NOTIFY payloads stop at 8,000 bytes: a bigger event is sent as its seq
CHECKPOINT_LOCK = 0x6563686F63687074  # "echochpt": LangGraph's own migrations, one replica at a time


class PgRunHistory:
    """Tool events of every run and every replica, kept in PostgreSQL.

    Args:
        database: a DSN (a pool is opened and closed with this object) or a shared `PgDatabase`.
        durable_events: wait for the disk on each event's commit (slower; see below).
    """

    def __init__(self, database: str | PgDatabase, *, durable_events: bool = False) -> None:
        self.db, self._owns_db = open_database(database)
        # Not durable (the default): an event's commit does not wait for the disk. A replica killed loses
        # nothing it recorded; only a crash of the database server itself can lose its last fraction of a
        # second of events (never half an event). Runs and checkpoints are always durable.
        self._commit_mode = "on" if durable_events else "off"
        self.origin = uuid.uuid4().hex
        self._listener: PgListener | None = None
        self._followers: list[Callable[[ToolEvent], None]] = []
        self._saver_pool: Any = None

    def __call__(self, event: ToolEvent) -> None:
        """Keep one event (the sink interface)."""
        self.record(event)

    def record(self, event: ToolEvent) -> None:
        """Keep one event; an event already kept (same `event_id`) is not kept twice."""
        body = event.to_json()
        small = len(body.encode()) <= _NOTIFY_MAX_BYTES
        # one statement, so one round trip and its own transaction: the insert and its NOTIFY commit together
        with self.db.connection() as conn:
            conn.execute(
                "WITH commit_mode AS (SELECT set_config('synchronous_commit', %s, true) AS mode),"
                " kept AS (INSERT INTO echo_events (event_id, type, timestamp, run_id, workflow_id, agent_id,"
                " tool_id, body) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (event_id) DO NOTHING"
                " RETURNING seq)"
                " SELECT pg_notify(%s, json_build_object('origin', %s::text, 'seq', seq, 'body', %s::text)::text)"
                " FROM kept, commit_mode",
                (
                    self._commit_mode,
                    event.event_id,
                    event.type,
                    event.timestamp,
                    event.run_id,
                    event.workflow_id,
                    event.agent_id,
                    event.tool_id,
                    body,
                    CHANNEL,
                    self.origin,
                    body if small else None,
                ),
            )

    def follow(self, callback: Callable[[ToolEvent], None]) -> None:
        """Call `callback(event)` (on a listener thread) for each event another replica records."""
        self._followers.append(callback)
        if self._listener is None:
            self._listener = PgListener(self.db.dsn, [CHANNEL], self._heard).start()

    def _heard(self, channel: str, payload: str) -> None:
        note = json.loads(payload)
        if note.get("origin") == self.origin:
            return
        body = note.get("body")
        if body is None:
            with self.db.connection() as conn:
                row = conn.execute("SELECT body FROM echo_events WHERE seq = %s", (note["seq"],)).fetchone()
            if row is None:
                return  # pruned meanwhile
            body = row[0]
        event = _event_from_json(body)
        for callback in list(self._followers):
            callback(event)

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
                clauses.append(f"{column} = %s")
                params.append(value)
        if since is not None:
            clauses.append("timestamp >= %s")
            params.append(since)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self.db.connection() as conn:
            rows = conn.execute(
                f"SELECT body FROM echo_events {where} ORDER BY seq LIMIT %s",  # type: ignore[arg-type]
                (*params, limit),
            ).fetchall()
        return [_event_from_json(body) for (body,) in rows]

    def runs(self, *, workflow_id: str | None = None, limit: int = DEFAULT_LIMIT) -> list[RunSummary]:
        """The runs with kept events, newest first, at most `limit`."""
        check_limit(limit)
        where, params = ("AND workflow_id = %s", [workflow_id]) if workflow_id is not None else ("", [])
        with self.db.connection() as conn:
            rows = conn.execute(
                "SELECT run_id, MAX(workflow_id), MIN(timestamp), MAX(timestamp),"
                " COUNT(*) FILTER (WHERE type = 'tool.invoked'),"
                " COUNT(*) FILTER (WHERE type IN ('tool.failed', 'tool.timeout'))"
                f" FROM echo_events WHERE run_id IS NOT NULL {where}"  # type: ignore[arg-type]
                " GROUP BY run_id ORDER BY MAX(seq) DESC LIMIT %s",
                (*params, limit),
            ).fetchall()
        return [RunSummary(r[0], r[1], r[2], r[3], int(r[4]), int(r[5])) for r in rows]

    def prune(
        self, *, days: float = DEFAULT_RETENTION_DAYS, now: Callable[[], datetime] | None = None
    ) -> int:
        """Forget events older than `days`; returns how many were removed."""
        if isinstance(days, bool) or not isinstance(days, int | float) or days <= 0:
            raise ValueError(f"days must be positive, got {days!r}")
        moment = (now() if now else datetime.now(UTC)) - timedelta(days=days)
        cutoff = moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM echo_events WHERE timestamp < %s", (cutoff,)).rowcount

    # -- runs ----------------------------------------------------------------------------------------

    def start_run(self, run_id: str, source: dict[str, Any], workflow_id: str | None = None) -> None:
        """Record a run as `running`, with the source it was compiled from (so it can be compiled again)."""
        now = _now()
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO echo_runs (run_id, workflow_id, status, source, created, updated)"
                " VALUES (%s, %s, 'running', %s, %s, %s) ON CONFLICT (run_id) DO UPDATE SET"
                " status = 'running', source = excluded.source, error = NULL, updated = excluded.updated",
                (run_id, workflow_id, json.dumps(source, ensure_ascii=False, default=str), now, now),
            )

    def set_status(self, run_id: str, status: str, error: str | None = None) -> None:
        """Move a recorded run to `status` (`running`, `interrupted`, `completed`, `failed`)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self.db.transaction() as conn:
            conn.execute(
                "UPDATE echo_runs SET status = %s, error = %s, updated = %s WHERE run_id = %s",
                (status, error, _now(), run_id),
            )

    def claim_run(self, run_id: str, expected: str = "interrupted", status: str = "running") -> bool:
        """Move a run from `expected` to `status` in one statement; False when it was not `expected`."""
        if status not in RUN_STATUSES:
            raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
        with self.db.transaction() as conn:
            moved = conn.execute(
                "UPDATE echo_runs SET status = %s, error = NULL, updated = %s WHERE run_id = %s AND status = %s",
                (status, _now(), run_id, expected),
            ).rowcount
        return bool(moved)

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The recorded run `{run_id, workflow_id, status, source, error, created, updated}`, or None."""
        keys = ("run_id", "workflow_id", "status", "source", "error", "created", "updated")
        with self.db.connection() as conn:
            row = conn.execute(
                f"SELECT {', '.join(keys)} FROM echo_runs WHERE run_id = %s", (run_id,)
            ).fetchone()  # type: ignore[arg-type]
        if row is None:
            return None
        record = dict(zip(keys, row, strict=True))
        record["source"] = json.loads(record["source"])
        return record

    def checkpointer(self) -> Any:
        """LangGraph's `PostgresSaver` on this database (a small pool of its own), its tables set up."""
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        if self._saver_pool is None:
            self._saver_pool = ConnectionPool(
                self.db.dsn,
                min_size=1,
                max_size=4,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                timeout=self.db.timeout,
                check=ConnectionPool.check_connection,
                open=False,
            )
            self._saver_pool.open(wait=True, timeout=self.db.timeout)
        saver = PostgresSaver(self._saver_pool)
        with self.db.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (CHECKPOINT_LOCK,))
            try:
                saver.setup()
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (CHECKPOINT_LOCK,))
        return saver

    def count(self) -> int:
        """How many events are kept."""
        with self.db.connection() as conn:
            row = conn.execute("SELECT COUNT(*) FROM echo_events").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Stop following, close the checkpointer's pool, and the database pool when this object opened it."""
        if self._listener is not None:
            self._listener.close()
        if self._saver_pool is not None:
            self._saver_pool.close()
        if self._owns_db:
            self.db.close()
