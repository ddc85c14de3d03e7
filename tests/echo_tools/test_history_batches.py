"""RunHistory writes events in batches from one thread: order kept per run, a full queue drops and counts,
close writes what is queued, and a new process reads everything the old one recorded."""

from __future__ import annotations

import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from echo_tools.events import ToolEvent
from echo_tools.history import RunHistory
from echo_tools.history.writer import EventWriter


def _event(run_id: str, n: int = 0) -> ToolEvent:
    return ToolEvent(type="tool.invoked", tool_id=f"tool_{n}", run_id=run_id)


def test_events_from_many_threads_keep_each_runs_order(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)

    def record(run: int) -> list[str]:
        events = [_event(f"run_{run}", i) for i in range(2_000)]
        for event in events:
            history(event)
        return [e.event_id for e in events]

    with ThreadPoolExecutor(4) as pool:
        sent = list(pool.map(record, range(4)))
    for run, ids in enumerate(sent):
        assert [e.event_id for e in history.events(run_id=f"run_{run}", limit=10_000)] == ids
    assert history.count() == 8_000 and history.dropped == 0
    history.close()


def test_a_history_records_in_the_emitting_thread_even_on_a_loop(tmp_path: Path) -> None:
    from echo_tools.events import EventBus

    class Watched(RunHistory):
        def record(self, event: ToolEvent) -> None:
            threads.append(threading.current_thread())
            super().record(event)

    threads: list[threading.Thread] = []
    history = Watched(tmp_path)
    bus = EventBus([history])
    bus.emit(_event("run_a"), on_loop=True)  # on a loop: only sinks that may block wait for the bus's thread
    assert threads == [threading.current_thread()]  # queued for the writer at once, no second hand-off
    assert [e.run_id for e in history.events(run_id="run_a")] == ["run_a"]
    history.close()


def test_a_full_queue_drops_new_events_and_counts_them(caplog: pytest.LogCaptureFixture) -> None:
    written: list[ToolEvent] = []
    release = threading.Event()
    started = threading.Event()

    def slow_batch(events: list[ToolEvent]) -> None:
        started.set()
        assert release.wait(30)
        written.extend(events)

    writer = EventWriter(slow_batch, "test history", queue_size=3)
    writer.put(_event("r", 0))
    assert started.wait(10)  # the writer holds the first event: three more fit, the rest are dropped
    for i in range(1, 6):
        writer.put(_event("r", i))
    assert writer.dropped == 2
    assert "test history: 1 event(s) not kept (1 so far): 3 events already wait to be written" in caplog.text
    release.set()
    writer.close()
    assert [e.tool_id for e in written] == ["tool_0", "tool_1", "tool_2", "tool_3"]


def test_a_batch_that_fails_is_counted_and_the_writer_goes_on() -> None:
    written: list[ToolEvent] = []

    def failing_once(events: list[ToolEvent]) -> None:
        if not written and events[0].tool_id == "tool_0":
            written.append(events[0])
            raise OSError("disk full")
        written.extend(events)

    writer = EventWriter(failing_once, "test history")
    writer.put(_event("r", 0))
    assert writer.flush(10)
    writer.put(_event("r", 1))
    writer.close()
    assert writer.dropped == 1 and [e.tool_id for e in written] == ["tool_0", "tool_1"]


def test_an_event_recorded_after_close_is_counted_not_kept(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    history(_event("r"))
    history.close()
    history(_event("r"))
    assert history.dropped == 1
    assert RunHistory(tmp_path).count() == 1


def test_close_writes_every_queued_event(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    for i in range(5_000):
        history(_event("r", i))
    history.close()
    assert RunHistory(tmp_path).count() == 5_000


def test_a_process_that_exits_without_closing_keeps_what_it_recorded(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "from echo_tools.events import ToolEvent\n"
        "from echo_tools.history import RunHistory\n"
        "history = RunHistory(sys.argv[1])\n"
        "for i in range(3000):\n"
        "    history(ToolEvent(type='tool.invoked', tool_id='t', run_id='r'))\n"
    )
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, timeout=120)
    assert RunHistory(tmp_path).count() == 3_000
