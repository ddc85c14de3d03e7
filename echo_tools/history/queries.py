"""What both run histories (SQLite `RunHistory`, PostgreSQL `PgRunHistory`) ask their database, once.

`HistoryQueries` holds the SQL of every read and of the runs table's writes, written with `?`
placeholders and `{events}` / `{runs}` table names; a history supplies its tables, its placeholder, and
three primitives: `_rows` (a read), `_change` (one write in its own transaction, returning the row count)
and `_write_events` (a batch of events in one transaction). Events go through an `EventWriter`, so a read
first waits for the events this process already recorded.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from echo_tools.events import InlineSink, ToolEvent
from echo_tools.history.browse import RunBrowser, json_text
from echo_tools.history.recording import Recording
from echo_tools.history.writer import EventWriter

DEFAULT_LIMIT = 100
MAX_LIMIT = 10_000
DEFAULT_RETENTION_DAYS = 30
# a run's status, the same word everywhere (docs/runs.md has the table of when each happens)
RUN_STATUSES = ("running", "interrupted", "completed", "completed_with_errors", "failed", "cancelled")


def events_table_sql(table: str, seq_column: str) -> tuple[str, ...]:
    """The statements making an events table (`seq_column`: the database's auto-numbered key) and its
    indexes by run, tool, agent and time; both histories' first migrations use them."""
    return (
        f"""CREATE TABLE {table} (
            seq {seq_column},
            event_id TEXT NOT NULL UNIQUE,
            type TEXT NOT NULL,
            timestamp TEXT NOT NULL,
            run_id TEXT,
            workflow_id TEXT,
            agent_id TEXT,
            tool_id TEXT,
            body TEXT NOT NULL
        )""",
        f"CREATE INDEX {table}_run ON {table} (run_id, seq)",
        f"CREATE INDEX {table}_tool ON {table} (tool_id, seq)",
        f"CREATE INDEX {table}_agent ON {table} (agent_id, seq)",
        f"CREATE INDEX {table}_time ON {table} (timestamp)",
    )


def runs_table_sql(table: str) -> str:
    """The statement making a runs table: what a run needs to be resumed from another process, its
    source and where it stands."""
    return f"""CREATE TABLE {table} (
            run_id TEXT PRIMARY KEY,
            workflow_id TEXT,
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            error TEXT,
            created TEXT NOT NULL,
            updated TEXT NOT NULL
        )"""


_RUN_KEYS = ("run_id", "workflow_id", "status", "source", "error", "created", "updated")
_PAGE = 5_000  # events read at once when a whole run is read (`recording`)
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
    status: str | None = None  # None: events with this run id, but no workflow run recorded

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(
            f"since must be an ISO 8601 time such as 2026-01-31T12:00:00Z, got {since!r}"
        ) from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def timestamp_now() -> str:
    """Now, in the events' timestamp form (UTC, `Z`)."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def event_from_json(body: str) -> ToolEvent:
    """A kept event read back (fields this version does not know are left out)."""
    data = json.loads(body)
    return ToolEvent(**{k: v for k, v in data.items() if k in _EVENT_FIELDS})


class HistoryQueries(InlineSink):
    """The queries of a run history; see the module docstring for what a subclass supplies.

    As a sink it is inline: recording only queues the event for its writer thread (never blocking), so
    the event bus's own delivery thread would be a second hand-off for nothing.
    """

    events_table = "events"
    runs_table = "runs"
    placeholder = "?"
    writer: EventWriter

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _change(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        raise NotImplementedError

    def _write_events(self, events: list[ToolEvent]) -> None:
        raise NotImplementedError

    def _sql(self, sql: str) -> str:
        text = sql.format(events=self.events_table, runs=self.runs_table)
        return text.replace("?", self.placeholder) if self.placeholder != "?" else text

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        self.writer.flush()  # what this process recorded is readable once recorded
        return self._rows(self._sql(sql), params)

    # -- events --------------------------------------------------------------------------------------

    def __call__(self, event: ToolEvent) -> None:
        """Keep one event (the sink interface)."""
        self.record(event)

    def record(self, event: ToolEvent) -> None:
        """Keep one event (written in a batch soon after; an event already kept is not kept twice)."""
        self.writer.put(event)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until the events recorded so far are written; False when `timeout` passed first."""
        return self.writer.flush(timeout)

    @property
    def dropped(self) -> int:
        """Events not kept because too many waited to be written (or writing them failed)."""
        return self.writer.dropped

    def events(
        self,
        *,
        run_id: str | None = None,
        tool_id: str | None = None,
        agent_id: str | None = None,
        since: str | None = None,
        limit: int = DEFAULT_LIMIT,
        newest_first: bool = False,
        principal: str | None = None,
    ) -> list[ToolEvent]:
        """The kept events matching every filter given (`principal`: of that principal's calls), oldest
        first (`newest_first`: the latest `limit`, newest first), at most `limit` (1..10,000).

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
        if principal is not None:  # before the limit: a page of another principal's events is no page
            clauses.append(f"{json_text('body', 'principal', self.placeholder != '?')} = ?")
            params.append(principal)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        order = "DESC" if newest_first else ""
        rows = self._read(
            f"SELECT body FROM {{events}} {where} ORDER BY seq {order} LIMIT ?", (*params, limit)
        )
        return [event_from_json(body) for (body,) in rows]

    def run_events(self, run_id: str, *, nested: bool = False) -> Iterator[ToolEvent]:
        """Every kept event of one run, oldest first, read a page at a time (no limit); `nested`: with
        the events of its sub-runs (`RUN_ID/...`: the runs of workflow and agent tools it called)."""
        after = 0
        # run ids from "R/" up to "R0" ('0' follows '/') are exactly those starting with "R/"
        where = "(run_id = ? OR (run_id >= ? AND run_id < ?))" if nested else "run_id = ?"
        ids = (run_id, f"{run_id}/", f"{run_id}0") if nested else (run_id,)
        while True:
            rows = self._read(
                f"SELECT seq, body FROM {{events}} WHERE {where} AND seq > ? ORDER BY seq LIMIT ?",
                (*ids, after, _PAGE),
            )
            for seq, body in rows:
                after = seq
                yield event_from_json(body)
            if len(rows) < _PAGE:
                return

    def recording(self, run_id: str) -> Recording:
        """The tool calls of a recorded run, for `ToolExecutor(..., replay=history.recording(run_id))`."""
        return Recording(self.run_events(run_id), run_id=run_id)

    def runs(
        self, *, workflow_id: str | None = None, status: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> list[RunSummary]:
        """The runs, newest activity first, at most `limit`: the workflow runs recorded (with their status)
        and the other run ids the kept events carry (direct calls with a `run_id`; status None). Sub-runs
        (`RUN_ID/...`, of the workflow and agent tools a run called) are part of their run, not listed.

        Raises:
            ValueError: `limit` is out of range, or `status` is not one of `RUN_STATUSES`.
        """
        check_limit(limit)
        if status is not None:
            _check_status(status)
        events_where, runs_where, params = "", "", [*_WAITING_BODIES, "%/%"]
        if workflow_id is not None:
            events_where, runs_where = "AND workflow_id = ?", "WHERE workflow_id = ?"
            params += [workflow_id, workflow_id]
        status_where = ""
        if status is not None:
            status_where = "WHERE r.status = ?"
            params.append(status)
        rows = self._read(
            "SELECT u.run_id, MAX(u.workflow_id), MIN(u.first), COALESCE(MAX(u.last), MIN(u.first)),"
            " SUM(u.calls), SUM(u.failed),"
            " MAX(r.status) FROM ("
            " SELECT run_id, MAX(workflow_id) AS workflow_id, MIN(timestamp) AS first,"
            " MAX(timestamp) AS last, SUM(CASE WHEN type = 'tool.invoked' THEN 1 ELSE 0 END) AS calls,"
            # a call waiting for a person's approval is not a failure (its `tool.failed` says approval_required)
            " SUM(CASE WHEN type IN ('tool.failed', 'tool.timeout') AND body NOT LIKE ? AND body NOT LIKE ?"
            " THEN 1 ELSE 0 END) AS failed"
            f" FROM {{events}} WHERE run_id IS NOT NULL AND run_id NOT LIKE ? {events_where}"
            " GROUP BY run_id"
            " UNION ALL SELECT run_id, workflow_id, created, NULL, 0, 0"
            f" FROM {{runs}} {runs_where}"
            f") u LEFT JOIN {{runs}} r ON r.run_id = u.run_id {status_where}"
            " GROUP BY u.run_id ORDER BY COALESCE(MAX(u.last), MIN(u.first)) DESC, u.run_id LIMIT ?",
            (*params, limit),
        )
        return [RunSummary(r[0], r[1], r[2], r[3], int(r[4] or 0), int(r[5] or 0), r[6]) for r in rows]

    def prune(
        self, *, days: float = DEFAULT_RETENTION_DAYS, now: Callable[[], datetime] | None = None
    ) -> int:
        """Forget events older than `days`; returns how many were removed."""
        if isinstance(days, bool) or not isinstance(days, int | float) or days <= 0:
            raise ValueError(f"days must be positive, got {days!r}")
        moment = (now() if now else datetime.now(UTC)) - timedelta(days=days)
        cutoff = moment.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        self.writer.flush()
        return self._change(self._sql("DELETE FROM {events} WHERE timestamp < ?"), (cutoff,))

    def count(self) -> int:
        """How many events are kept."""
        rows = self._read("SELECT COUNT(*) FROM {events}")
        return int(rows[0][0]) if rows else 0

    @cached_property
    def browser(self) -> RunBrowser:
        """The run viewer's queries on this history (`echo_tools.history.browse`; makes their indexes)."""
        return RunBrowser(
            self._read, lambda sql: self._change(self._sql(sql)), postgres=self.placeholder != "?"
        )

    # -- runs ----------------------------------------------------------------------------------------

    def start_run(
        self, run_id: str, source: dict[str, Any], workflow_id: str | None = None, *, replace: bool = False
    ) -> bool:
        """Record a run as `running`, with the source it was compiled from (so it can be compiled again);
        False (and nothing changed) when a run with this id is already recorded, unless `replace`."""
        now = timestamp_now()
        on_conflict = (
            "DO UPDATE SET status = 'running', source = excluded.source, error = NULL,"
            " updated = excluded.updated"
            if replace
            else "DO NOTHING"
        )
        added = self._change(
            self._sql(
                "INSERT INTO {runs} (run_id, workflow_id, status, source, created, updated)"
                f" VALUES (?, ?, 'running', ?, ?, ?) ON CONFLICT (run_id) {on_conflict}"
            ),
            (run_id, workflow_id, json.dumps(source, ensure_ascii=False, default=str), now, now),
        )
        return bool(added)

    def set_status(
        self,
        run_id: str,
        status: str,
        error: str | None = None,
        *,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        """Move a recorded run to `status` (one of `RUN_STATUSES`); `details` (JSON values) are merged into
        what is kept with its source (such as `paused_at`, the nodes a paused run waits at)."""
        _check_status(status)
        if details:
            record = self.run(run_id)
            stored = record["source"] if record is not None else None
            if isinstance(stored, dict):
                stored.update(details)
                self._change(
                    self._sql("UPDATE {runs} SET source = ? WHERE run_id = ?"),
                    (json.dumps(stored, ensure_ascii=False, default=str), run_id),
                )
        self._change(
            self._sql("UPDATE {runs} SET status = ?, error = ?, updated = ? WHERE run_id = ?"),
            (status, error, timestamp_now(), run_id),
        )

    def claim_run(self, run_id: str, expected: str = "interrupted", status: str = "running") -> bool:
        """Move a run from `expected` to `status` in one statement; False when it was not `expected` (another
        process claimed it first: two resumes of one paused run never both go ahead)."""
        _check_status(status)
        moved = self._change(
            self._sql(
                "UPDATE {runs} SET status = ?, error = NULL, updated = ? WHERE run_id = ? AND status = ?"
            ),
            (status, timestamp_now(), run_id, expected),
        )
        return bool(moved)

    def run(self, run_id: str) -> dict[str, Any] | None:
        """The recorded run `{run_id, workflow_id, status, source, error, created, updated, owner}`, or
        None."""
        rows = self._rows(
            self._sql(f"SELECT {', '.join(_RUN_KEYS)} FROM {{runs}} WHERE run_id = ?"), (run_id,)
        )
        if not rows:
            return None
        record = dict(zip(_RUN_KEYS, rows[0], strict=True))
        record["source"] = json.loads(record["source"])
        stored = record["source"]
        # the principal that started it (kept with its source); runs recorded before owners: the operator's
        record["owner"] = (stored.get("owner") if isinstance(stored, dict) else None) or "operator"
        return record


# the body of a `tool.failed` event of a call that waits for an approval (either JSON spacing)
_WAITING_BODIES = ('%"error_type": "approval_required"%', '%"error_type":"approval_required"%')


def _check_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise ValueError(f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}")
