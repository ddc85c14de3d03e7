"""PgRunHistory: `RunHistory` on PostgreSQL, one event history for every replica on the database.

Same public API as `echo_tools.history.RunHistory` (the queries are `echo_tools.history.queries`, shared;
events are written in batches by one thread, one transaction per batch). Each replica's events go to one
table, indexed by run, tool, agent and time; `follow(callback)` hears the events other replicas record
(LISTEN/NOTIFY, whose notes carry only rows' ids: the events are read from the table), which is what lets
`/tools/events` on one replica stream every replica's calls. A batch of events sends one note per
`NOTE_SEQS` events, and a replica hearing it reads them in one query: the cost of following is per batch,
not per event.
`checkpointer()` is LangGraph's `PostgresSaver`, so a run paused on one replica resumes on another.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

from echo_tools.events import ToolEvent
from echo_tools.history.queries import HistoryQueries, event_from_json
from echo_tools.history.writer import EventWriter
from echo_tools.pg.database import PgDatabase, open_database
from echo_tools.pg.listener import PgListener

CHANNEL = "echo_events"
NOTE_SEQS = 300  # seqs named by one note (20 characters each at most: under NOTIFY's 8,000 bytes)
_SEEN_KEPT = 10_000  # the seqs of the events last delivered to followers (a repeated note is ignored)
CHECKPOINT_LOCK = 0x6563686F63687074  # "echochpt": LangGraph's own migrations, one replica at a time


class PgRunHistory(HistoryQueries):
    """Tool events of every run and every replica, kept in PostgreSQL.

    Args:
        database: a DSN (a pool is opened and closed with this object) or a shared `PgDatabase`.
        durable_events: wait for the disk on each event's commit (slower; see below).
    """

    events_table = "echo_events"
    runs_table = "echo_runs"
    placeholder = "%s"

    def __init__(self, database: str | PgDatabase, *, durable_events: bool = False) -> None:
        self.db, self._owns_db = open_database(database)
        # Not durable (the default): a batch's commit does not wait for the disk. A replica killed loses
        # only the events still queued for its writer (at most ~50 ms' worth); a crash of the database server
        # itself can lose its last fraction of a second of events (never half an event). Runs and
        # checkpoints are always durable.
        self._commit_mode = "on" if durable_events else "off"
        self.origin = uuid.uuid4().hex
        self._listener: PgListener | None = None
        self._followers: list[Callable[[ToolEvent], None]] = []
        self._seen: set[int] = set()
        self._seen_order: deque[int] = deque()
        self._saver_pool: Any = None
        self.writer = EventWriter(self._write_events, f"PostgreSQL {self.db.where}")

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self.db.connection() as conn:
            return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]

    def _change(self, sql: str, params: tuple[Any, ...] = ()) -> int:
        with self.db.transaction() as conn:
            return conn.execute(sql, params).rowcount  # type: ignore[arg-type]

    def _write_events(self, events: list[ToolEvent]) -> None:
        """The batch in one statement, its own transaction: its rows inserted in their order, one NOTIFY
        per `NOTE_SEQS` rows kept (delivered when it commits), the commit mode set for this transaction.

        A NOTIFY carries only rows' `seq`s (and this replica's origin): whoever can send one (any role
        that may connect) cannot put an event into another replica's stream, which reads the rows itself.
        """
        columns: list[list[Any]] = [[], [], [], [], [], [], [], []]
        for event in events:
            row = (event.event_id, event.type, event.timestamp, event.run_id, event.workflow_id,
                   event.agent_id, event.tool_id, event.to_json())  # fmt: skip
            for column, value in zip(columns, row, strict=True):
                column.append(value)
        with self.db.connection() as conn:  # autocommit: the one statement is the transaction
            conn.execute(_WRITE_BATCH, (self._commit_mode, *columns, NOTE_SEQS, CHANNEL, self.origin))

    def follow(self, callback: Callable[[ToolEvent], None]) -> None:
        """Call `callback(event)` (on a listener thread) for each event another replica records."""
        self._followers.append(callback)
        if self._listener is None:
            self._listener = PgListener(self.db.dsn, [CHANNEL], self._heard).start()

    def _heard(self, channel: str, payload: str) -> None:
        origin, seqs = _note_seqs(payload)
        if origin == self.origin:
            return
        wanted = [seq for seq in dict.fromkeys(seqs) if seq not in self._seen]
        if not wanted:
            return
        with self.db.connection() as conn:  # the events are what the table holds, never what a note says
            rows = conn.execute(
                "SELECT seq, body FROM echo_events WHERE seq = ANY(%s) ORDER BY seq", (wanted,)
            ).fetchall()
        for seq, body in rows:  # a seq not found was pruned meanwhile, or names no event
            self._seen.add(seq)  # a note repeated (or replayed by anyone) delivers its events once
            self._seen_order.append(seq)
            if len(self._seen_order) > _SEEN_KEPT:
                self._seen.discard(self._seen_order.popleft())
            event = event_from_json(body)
            for callback in list(self._followers):
                callback(event)

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

    def close(self) -> None:
        """Write the events still queued, stop following, close the checkpointer's pool, and the database
        pool when this object opened it."""
        self.writer.close()
        if self._listener is not None:
            self._listener.close()
        if self._saver_pool is not None:
            self._saver_pool.close()
        if self._owns_db:
            self.db.close()


# One statement for a batch (each statement costs a round trip and its own parsing on both sides):
# - `mode`: synchronous_commit for this transaction only (set_config's `true`), read when it commits;
# - `kept`: the rows in the batch's order (so their seqs are too), an event_id kept already skipped; the
#   columns are sent as binary arrays (`%b`): text needs no escaping that way;
# - then one NOTIFY per NOTE_SEQS seqs kept: {"origin": ..., "seqs": [...]}.
_WRITE_BATCH = """
WITH mode AS (
    SELECT set_config('synchronous_commit', %s, true)
), kept AS (
    INSERT INTO echo_events (event_id, type, timestamp, run_id, workflow_id, agent_id, tool_id, body)
    SELECT event_id, type, timestamp, run_id, workflow_id, agent_id, tool_id, body
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[], %b::text[],
                %b::text[])
        WITH ORDINALITY AS e (event_id, type, timestamp, run_id, workflow_id, agent_id, tool_id, body, n)
    ORDER BY n
    ON CONFLICT (event_id) DO NOTHING
    RETURNING seq
), numbered AS (
    SELECT seq, (row_number() OVER (ORDER BY seq) - 1) / %s AS note FROM kept
)
SELECT pg_notify(%s, json_build_object('origin', %s::text, 'seqs', json_agg(seq ORDER BY seq))::text)
FROM numbered, mode GROUP BY note
"""


def _note_seqs(payload: str) -> tuple[Any, list[int]]:
    """The origin and the seqs a note names (`seqs`, at most `NOTE_SEQS` of them, or the single `seq` of
    notes from an older echo-tools); anything else names nothing."""
    try:
        note = json.loads(payload)
        origin, seqs = note.get("origin"), note.get("seqs", [note.get("seq")])
    except (ValueError, AttributeError):
        return None, []  # not one of ours: nothing to read
    if not isinstance(seqs, list):
        return origin, []
    return origin, [seq for seq in seqs[:NOTE_SEQS] if isinstance(seq, int) and not isinstance(seq, bool)]
