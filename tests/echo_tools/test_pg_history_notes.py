"""PgRunHistory's notes to other replicas (a real PostgreSQL server): one NOTIFY per
`NOTE_SEQS` events of a batch, read back by a follower in one query, in order, each event once."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import psycopg
import pytest

from echo_tools.events import ToolEvent
from echo_tools.pg import PgRunHistory
from echo_tools.pg.history import NOTE_SEQS
from tests.echo_tools._pg_support import wait_until

EVENTS = 700  # more than two notes' worth


def _event(run_id: str, n: int) -> ToolEvent:
    return ToolEvent(type="tool.completed", tool_id="tool_a", run_id=run_id, output=n)


def _notes(listening: psycopg.Connection, wanted: int) -> list[dict]:
    """The notes on `echo_events` until they name `wanted` seqs (at most 30 s)."""
    notes: list[dict] = []
    while sum(len(n.get("seqs", [])) for n in notes) < wanted:
        arrived = list(listening.notifies(timeout=30, stop_after=1))
        assert arrived, f"heard {len(notes)} notes, naming fewer than {wanted} events"
        notes += [json.loads(note.payload) for note in arrived]
    return notes


@pytest.fixture
def listening(dsn: str) -> Iterator[psycopg.Connection]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("LISTEN echo_events")
        yield conn


def test_a_batch_sends_one_note_per_note_seqs_events_naming_only_their_seqs(dsn, listening) -> None:
    history = PgRunHistory(dsn)
    try:
        history(_event("warm", 0))  # the pool and the table opened
        assert history.flush(30)
        _notes(listening, 1)
        with psycopg.connect(dsn) as blocker:  # the writer waits on the table while the batch queues up
            blocker.execute("LOCK TABLE echo_events IN EXCLUSIVE MODE")
            for n in range(EVENTS):
                history(_event("batch", n))
            blocker.commit()
        assert history.flush(30)
        notes = _notes(listening, EVENTS)
        with psycopg.connect(dsn) as conn:
            stored = [
                r[0] for r in conn.execute("SELECT seq FROM echo_events WHERE run_id = 'batch' ORDER BY seq")
            ]
        # the first batch took what waited when the writer woke, the second everything else: two batches
        # of at most ceil(k / 300) + ceil((700 - k) / 300) notes
        assert len(notes) <= 4
        assert all(set(note) == {"origin", "seqs"} and note["origin"] == history.origin for note in notes)
        assert all(0 < len(note["seqs"]) <= NOTE_SEQS for note in notes)
        assert sorted(seq for note in notes for seq in note["seqs"]) == stored
        assert [e.output for e in history.events(run_id="batch", limit=1000)] == list(range(EVENTS))
    finally:
        history.close()


def test_the_same_event_twice_in_one_batch_is_kept_and_named_once(dsn, listening) -> None:
    history = PgRunHistory(dsn)
    try:
        event = _event("twice", 1)
        with psycopg.connect(dsn) as blocker:
            blocker.execute("LOCK TABLE echo_events IN EXCLUSIVE MODE")
            history(event)
            history(event)
            history(_event("twice", 2))
            blocker.commit()
        assert history.flush(30)
        notes = _notes(listening, 2)
        assert [e.output for e in history.events(run_id="twice")] == [1, 2]
        assert sum(len(note["seqs"]) for note in notes) == 2
    finally:
        history.close()


def test_a_note_naming_many_seqs_delivers_their_stored_events_in_order_once(dsn) -> None:
    follower = PgRunHistory(dsn)
    heard: list[ToolEvent] = []
    done = threading.Event()

    def note(event: ToolEvent) -> None:
        heard.append(event)
        if event.run_id == "last":
            done.set()

    try:
        follower.follow(note)
        events = [_event("quiet", n) for n in range(5)]
        with psycopg.connect(dsn, autocommit=True) as conn:  # rows written without a note of their own
            seqs = [
                conn.execute(
                    "INSERT INTO echo_events (event_id, type, timestamp, run_id, tool_id, body)"
                    " VALUES (%s, %s, %s, %s, %s, %s) RETURNING seq",
                    (e.event_id, e.type, e.timestamp, e.run_id, e.tool_id, e.to_json()),
                ).fetchone()[0]
                for e in events
            ]
            named = [seqs[3], seqs[1], True, "7", seqs[0], seqs[1], 999_999_999, seqs[4], seqs[2]]
            for _ in range(2):  # the second, a replay, delivers nothing more
                conn.execute(
                    "SELECT pg_notify('echo_events', %s)", (json.dumps({"origin": "x", "seqs": named}),)
                )
            last = _event("last", 9)
            row = conn.execute(
                "INSERT INTO echo_events (event_id, type, timestamp, run_id, tool_id, body)"
                " VALUES (%s, %s, %s, %s, %s, %s) RETURNING seq",
                (last.event_id, last.type, last.timestamp, last.run_id, last.tool_id, last.to_json()),
            ).fetchone()
            conn.execute("SELECT pg_notify('echo_events', %s)", (json.dumps({"origin": "x", "seq": row[0]}),))
        assert done.wait(30), "the follower heard no note"
        assert [(e.run_id, e.output) for e in heard] == [("quiet", n) for n in range(5)] + [("last", 9)]
    finally:
        follower.close()


@pytest.mark.parametrize(
    "payload", ["not json", "[1, 2]", '{"origin": "x", "seqs": "1,2"}', '{"origin": "x", "seqs": [true]}']
)
def test_a_note_naming_no_seq_is_ignored(dsn, payload: str) -> None:
    follower = PgRunHistory(dsn)
    heard: list[ToolEvent] = []
    try:
        follower.follow(heard.append)
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_notify('echo_events', %s)", (payload,))
        other = PgRunHistory(dsn)
        other(_event("after", 1))  # a real note after the odd one: once it is heard, the odd one was
        assert other.flush(30)
        other.close()
        wait_until(lambda: len(heard) > 0, 30, "the follower heard no note")
        assert [e.run_id for e in heard] == ["after"]
    finally:
        follower.close()
