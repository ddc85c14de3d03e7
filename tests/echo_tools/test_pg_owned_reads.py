"""Owned reads on PostgreSQL (issue 35): the run history's principal filter on events and its owner filter
on the viewer's runs answer on a real PostgreSQL server exactly as on SQLite, filtered before the limit."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools.events import ToolEvent
from echo_tools.history import RunHistory
from echo_tools.pg import PgRunHistory


@pytest.fixture
def history(dsn: str) -> Iterator[PgRunHistory]:
    kept = PgRunHistory(dsn)
    yield kept
    kept.close()


def test_a_principal_s_events_and_runs_are_filtered_alike_on_both_histories(
    history: PgRunHistory, tmp_path: Path
) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    sqlite = RunHistory(tmp_path)
    try:
        since = "2000-01-01T00:00:00Z"
        for kept in (sqlite, history):
            for index in range(5):
                kept(ToolEvent(type="tool.invoked", tool_id="t", run_id=f"r-{alice}", principal=alice,
                               input={"n": index}))  # fmt: skip
            kept(
                ToolEvent(type="tool.invoked", tool_id="t", run_id=f"r-{bob}", principal=bob, input={"n": 9})
            )
            kept.start_run(f"run-{alice}", {"owner": alice}, "wf")
            kept.start_run(f"run-{bob}", {"owner": bob}, "wf")
            kept.flush()
        for kept in (sqlite, history):
            mine = kept.events(principal=bob, limit=2)
            assert [(e.principal, e.input) for e in mine] == [(bob, {"n": 9})]  # filtered before the limit
            assert len(kept.events(principal=alice, limit=3)) == 3
            page = kept.browser.run_page(owner=bob, limit=1)
            assert [r["run_id"] for r in page["runs"]] == [f"run-{bob}"] and page["total"] == 1
            changed = kept.browser.runs_changed(since, owner=bob)
            assert [r["run_id"] for r in changed] == [f"run-{bob}"]
    finally:
        sqlite.close()
