"""PgRunHistory against a real PostgreSQL server: the RunHistory API, replicas, checkpoints, the index."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from echo_tools.events import ToolEvent
from echo_tools.history import MAX_LIMIT
from echo_tools.models import ToolContext
from echo_tools.pg import PgRunHistory
from tests.echo_tools._pg_support import approval_graph, spawn


@pytest.fixture
def history(dsn: str) -> Iterator[PgRunHistory]:
    kept = PgRunHistory(dsn)
    yield kept
    kept.close()


def _event(kind: str = "tool.invoked", **ids: str) -> ToolEvent:
    return ToolEvent(type=kind, tool_id=ids.pop("tool_id", "tool_a"), **ids)


def test_events_come_back_oldest_first_filtered_and_kept_once(history: PgRunHistory) -> None:
    first, second = _event(run_id="r1", agent_id="a1"), _event("tool.completed", run_id="r1")
    history(first)
    history(second)
    history(first)  # the same event twice is kept once
    history(_event(run_id="r2", tool_id="tool_b"))
    assert [e.event_id for e in history.events(run_id="r1")] == [first.event_id, second.event_id]
    assert [e.run_id for e in history.events(tool_id="tool_b")] == ["r2"]
    assert [e.event_id for e in history.events(agent_id="a1")] == [first.event_id]
    assert history.events(run_id="r1")[0].to_dict() == first.to_dict()
    assert len(history.events(limit=2)) == 2 and history.count() == 3
    assert history.events(since="2999-01-01T00:00:00Z") == []


def test_a_batch_keeps_its_order_and_every_character_of_its_text(history: PgRunHistory) -> None:
    awkward = ['quote " and \\ backslash', "{braces, commas}", "NULL", "", "line\nbreak\ttab", "ünï 😀"]
    events = [
        ToolEvent(type="tool.completed", tool_id="tool_a", run_id="r-text", agent_id=text, output=text)
        for text in awkward
    ]
    for event in events:  # queued at once: the writer takes them as one batch (or a few)
        history(event)
    back = history.events(run_id="r-text")
    assert [e.event_id for e in back] == [e.event_id for e in events]  # seqs follow the batch's order
    assert [(e.agent_id, e.output) for e in back] == [(text, text) for text in awkward]


def test_runs_are_summarised_newest_first(history: PgRunHistory) -> None:
    history(_event(run_id="r1", workflow_id="wf"))
    history(_event("tool.failed", run_id="r1", workflow_id="wf"))
    history(_event(run_id="r2"))
    runs = history.runs()
    assert [r.run_id for r in runs] == ["r2", "r1"]
    assert (runs[1].workflow_id, runs[1].calls, runs[1].failed) == ("wf", 1, 1)
    assert [r.run_id for r in history.runs(workflow_id="wf")] == ["r1"]


@pytest.mark.parametrize("limit", [0, MAX_LIMIT + 1, "10", True])
def test_a_bad_limit_is_refused_naming_it(history: PgRunHistory, limit: object) -> None:
    with pytest.raises(ValueError, match=f"limit .*got {limit!r}"):
        history.events(limit=limit)  # type: ignore[arg-type]


def test_a_bad_since_and_a_bad_status_and_bad_days_are_refused_naming_them(history: PgRunHistory) -> None:
    with pytest.raises(ValueError, match="since .*'yesterday'"):
        history.events(since="yesterday")
    with pytest.raises(ValueError, match="status .*'paused'"):
        history.set_status("r1", "paused")
    with pytest.raises(ValueError, match="days must be positive, got -1"):
        history.prune(days=-1)


def test_prune_forgets_only_events_older_than_the_retention(history: PgRunHistory) -> None:
    old = ToolEvent(type="tool.invoked", run_id="old", timestamp="2000-01-01T00:00:00.000000Z")
    history(old)
    history(_event(run_id="new"))
    assert history.prune(days=30) == 1
    assert [e.run_id for e in history.events()] == ["new"]
    later = lambda: datetime.now(UTC) + timedelta(days=31)  # noqa: E731
    assert history.prune(days=30, now=later) == 1 and history.count() == 0


def test_a_run_record_moves_through_its_statuses(history: PgRunHistory) -> None:
    assert history.run("nope") is None
    history.start_run("r1", {"nodes": [1, 2]}, workflow_id="wf")
    history.set_status("r1", "interrupted")
    record = history.run("r1")
    assert record is not None
    assert (record["status"], record["source"], record["workflow_id"]) == (
        "interrupted",
        {"nodes": [1, 2]},
        "wf",
    )
    history.set_status("r1", "failed", error="tool x failed")
    assert history.run("r1")["error"] == "tool x failed"  # type: ignore[index]


def test_events_from_every_replica_land_in_one_history_and_are_followed(dsn: str) -> None:
    one, two = PgRunHistory(dsn), PgRunHistory(dsn)
    try:
        heard: list[ToolEvent] = []
        arrived = threading.Event()

        def note(event: ToolEvent) -> None:
            heard.append(event)
            arrived.set()

        two.follow(note)
        mine = _event(run_id="shared")
        two(mine)  # a replica does not hear its own events back
        assert two.flush(10)  # written before the other replica's (each replica keeps its own order)
        theirs = _event("tool.completed", run_id="shared", tool_id="t" * 10_000)  # too big for a NOTIFY
        one(theirs)
        assert arrived.wait(10)
        assert [e.event_id for e in heard] == [theirs.event_id]
        assert heard[0].tool_id == "t" * 10_000
        assert [e.event_id for e in one.events(run_id="shared")] == [mine.event_id, theirs.event_id]
    finally:
        one.close()
        two.close()


def test_a_query_by_run_id_uses_the_index(dsn: str, history: PgRunHistory) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO echo_events (event_id, type, timestamp, run_id, tool_id, body)"
            " SELECT 'e' || i, 'tool.invoked', '2026-01-01T00:00:00Z', 'run_' || (i % 1000), 't', '{}'"
            " FROM generate_series(1, 20000) AS i"
        )
        conn.execute("ANALYZE echo_events")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT body FROM echo_events WHERE run_id = 'run_7' ORDER BY seq LIMIT 100"
            )
        )
    assert "echo_events_run" in plan


def test_a_run_paused_on_one_replica_resumes_in_another_process(dsn: str, history: PgRunHistory) -> None:
    from langgraph.types import Interrupt

    thread_id = f"run-{uuid.uuid4().hex[:8]}"
    history.start_run(thread_id, {"graph": "approval"})
    graph = approval_graph(history.checkpointer())
    paused = graph.invoke({"value": "order-7"}, {"configurable": {"thread_id": thread_id}})
    assert isinstance(paused["__interrupt__"][0], Interrupt)
    history.set_status(thread_id, "interrupted")
    child = spawn("resume", dsn, thread_id, "approved")
    out, err = child.communicate(timeout=120)
    assert child.returncode == 0, err
    assert out.strip() == "order-7:approved"
    assert history.run(thread_id)["status"] == "completed"  # type: ignore[index]


@pytest.mark.parametrize("durable", [False, True])
def test_either_commit_mode_keeps_the_event_and_leaves_the_pooled_connection_durable(
    dsn: str, durable: bool
) -> None:
    history = PgRunHistory(dsn, durable_events=durable)
    try:
        event = _event(run_id=f"mode-{durable}")
        history(event)
        assert [e.event_id for e in history.events(run_id=f"mode-{durable}")] == [event.event_id]
        with history.db.connection() as conn:  # the pool of one connection hands back the same one
            row = conn.execute(
                "SELECT current_setting('synchronous_commit'), reset_val FROM pg_settings"
                " WHERE name = 'synchronous_commit'"
            ).fetchone()
        assert row is not None and row[0] == row[1]  # the event's setting lasted its own transaction only
    finally:
        history.close()


def test_the_same_calls_answer_the_same_as_the_sqlite_history(history: PgRunHistory, tmp_path: Path) -> None:
    from echo_tools.history import RunHistory

    sqlite = RunHistory(tmp_path)
    try:
        events = [
            ToolEvent(type="tool.invoked", run_id="a", workflow_id="wf", agent_id="x", tool_id="t1"),
            ToolEvent(type="tool.failed", run_id="a", workflow_id="wf", agent_id="x", tool_id="t1"),
            ToolEvent(type="tool.invoked", run_id="b", agent_id="y", tool_id="t2"),
            ToolEvent(type="tool.timeout", run_id="b", agent_id="y", tool_id="t2"),
            ToolEvent(type="tool.registered", tool_id="t3"),
        ]
        for kept in (sqlite, history):
            for event in events:
                kept(event)
            kept.start_run("a", {"n": 1}, workflow_id="wf")
            kept.set_status("a", "completed")
        for query in ({}, {"run_id": "a"}, {"tool_id": "t2"}, {"agent_id": "x"}, {"limit": 2}):
            assert [e.to_dict() for e in history.events(**query)] == [
                e.to_dict() for e in sqlite.events(**query)
            ]
        assert [r.to_dict() for r in history.runs()] == [r.to_dict() for r in sqlite.runs()]
        assert [r.to_dict() for r in history.runs(workflow_id="wf")] == [
            r.to_dict() for r in sqlite.runs(workflow_id="wf")
        ]
        mine, theirs = history.run("a"), sqlite.run("a")
        assert mine is not None and theirs is not None
        assert {k: mine[k] for k in ("run_id", "workflow_id", "status", "source", "error")} == {
            k: theirs[k] for k in ("run_id", "workflow_id", "status", "source", "error")
        }
        assert history.count() == sqlite.count() == len(events)
    finally:
        sqlite.close()


def test_claiming_a_paused_run_succeeds_once_across_replicas(history: PgRunHistory, dsn: str) -> None:
    history.start_run("paused", {"workflow": {}}, workflow_id="wf")
    history.set_status("paused", "interrupted")
    replica = PgRunHistory(dsn)
    try:
        assert history.claim_run("paused") is True
        assert replica.claim_run("paused") is False
        assert replica.run("paused")["status"] == "running"
    finally:
        replica.close()


def test_a_recorded_run_on_postgresql_answers_a_replay(history: PgRunHistory) -> None:
    from echo_tools.executor import ToolExecutor
    from tests.echo_tools._executor_support import local_tool, make_registry

    add = local_tool("Add", "add", input_schema={"type": "object"})
    executor = ToolExecutor(make_registry(add), [history])
    assert executor.invoke_sync("Add", {"a": 2, "b": 3}, ToolContext(run_id="pg_rec")).output == 5
    executor.close()
    recording = history.recording("pg_rec")
    replayer = ToolExecutor(make_registry(add), replay=recording)
    again = replayer.invoke_sync("Add", {"a": 2, "b": 3})
    other = replayer.invoke_sync("Add", {"a": 1, "b": 1})
    replayer.close()
    assert again.output == 5 and again.metadata["replayed"] is True
    assert other.success is False and "call 2 ('tool_add' with {'a': 1, 'b': 1}) was not recorded" in (
        other.error or ""
    )


def test_many_events_from_many_threads_keep_each_runs_order(history: PgRunHistory) -> None:
    def record(run: int) -> list[str]:
        events = [_event(run_id=f"run_{run}", tool_id=f"t{i}") for i in range(300)]
        for event in events:
            history(event)
        return [e.event_id for e in events]

    with ThreadPoolExecutor(4) as pool:
        sent = list(pool.map(record, range(4)))
    for run, ids in enumerate(sent):
        assert [e.event_id for e in history.events(run_id=f"run_{run}", limit=1000)] == ids
    assert history.count() == 1200 and history.dropped == 0


@pytest.fixture
def stranger_dsn(dsn: str) -> Iterator[str]:
    """The DSN of a real role of the same server that may log in and nothing more: no table privileges
    (CREATE ROLE ... LOGIN, no grants), as anyone with a login to a shared server has."""
    role = f"stranger_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")  # type: ignore[arg-type]
    try:
        yield dsn.replace("postgresql://postgres@", f"postgresql://{role}@", 1)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP ROLE {role}")  # type: ignore[arg-type]


def _forge(stranger_dsn: str, forged: ToolEvent) -> None:
    """What a role without table privileges can send: notes on the channel, in every shape."""
    with psycopg.connect(stranger_dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # it can read and write no table
            conn.execute("SELECT count(*) FROM echo_events")
        bodies = [
            {"origin": "someone", "seq": 999_999_999, "body": forged.to_json()},
            {"body": forged.to_json()},
            {"origin": "someone", "seq": 1},  # a row id that is not this replica's to announce
            forged.to_dict(),
        ]
        for body in bodies:
            conn.execute("SELECT pg_notify('echo_events', %s)", (json.dumps(body),))


def test_a_forged_notify_puts_no_event_into_another_replica_s_stream(dsn: str, stranger_dsn: str) -> None:
    """Any role that can log in can NOTIFY (no table privilege needed): the note carries only a row id, so a
    forged event in it is never delivered, and a repeated note delivers its real event once."""
    one, two = PgRunHistory(dsn), PgRunHistory(dsn)
    try:
        heard: list[ToolEvent] = []
        arrived = threading.Event()

        def note(event: ToolEvent) -> None:
            heard.append(event)
            arrived.set()

        two.follow(note)
        with psycopg.connect(dsn, autocommit=True) as listener:  # the notes do reach every listener
            listener.execute("LISTEN echo_events")
            _forge(stranger_dsn, _event("tool.completed", run_id="forged", tool_id="forged_tool"))
            notes = [n.payload for n in listener.notifies(timeout=10, stop_after=4)]
        assert len(notes) == 4 and sum("forged_tool" in n for n in notes) == 3
        real = _event("tool.completed", run_id="real")
        one(real)
        assert one.flush(10) and arrived.wait(10)
        arrived.clear()
        row = None
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT seq FROM echo_events WHERE event_id = %s", (real.event_id,)).fetchone()
        assert row is not None
        with psycopg.connect(
            stranger_dsn, autocommit=True
        ) as conn:  # the real note, replayed by the stranger
            conn.execute("SELECT pg_notify('echo_events', %s)", (json.dumps({"origin": "x", "seq": row[0]}),))
        one(_event("tool.completed", run_id="after"))  # a later note, so the replayed one was surely heard
        assert one.flush(10) and arrived.wait(10)
        assert [e.run_id for e in heard] == ["real", "after"]
        assert "forged_tool" not in [e.tool_id for e in heard]
    finally:
        one.close()
        two.close()


def test_a_forged_notify_never_reaches_a_replica_s_tools_events_stream(
    dsn: str, stranger_dsn: str, tmp_path: Path
) -> None:
    """A replica wired as `serve` wires it (its /tools/events follows the shared history): the stranger's
    notes, sent first and naming the very run the client follows, never reach the stream; the real event
    recorded after them is the first one it streams."""
    from echo_tools.api import create_app
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry
    from tests.echo_tools._api_support import serve_in_thread
    from tests.echo_tools._pg_support import first_streamed_event

    writer, followed = PgRunHistory(dsn), PgRunHistory(dsn)
    registry = ToolRegistry(tmp_path / "tools")
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, history=followed)
    followed.follow(app.state.echo_tools.broadcaster)
    real = _event("tool.completed", run_id="watched", tool_id="real_tool")

    def trigger() -> None:
        _forge(stranger_dsn, _event("tool.completed", run_id="watched", tool_id="forged_tool"))
        writer(real)
        assert writer.flush(10)

    try:
        with serve_in_thread(app) as url:
            first = first_streamed_event(f"{url}/tools/events", "watched", trigger)
    finally:
        executor.close()
        writer.close()
        followed.close()
    assert first["tool_id"] == "real_tool" and first["event_id"] == real.event_id
