"""EventWriter: a run history's events written in batches by one thread, so recording keeps up with a busy
server (one transaction per batch instead of one per event).

`put` never blocks the caller: the event waits in a bounded queue; when the queue is full the event is
dropped, counted (`dropped`) and logged. Under sustained load the writer lingers `LINGER_S` after a
batch, so a busy server's events are queued without a thread wake-up each and written some milliseconds'
worth at a time; an idle writer writes each event as soon as it comes. One writer thread keeps the order events were put in (so each
run's events stay in order). `flush` waits until everything put so far is written; `close` flushes and
stops the thread, and every writer still open is flushed when the interpreter exits.
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from echo_tools.events import ToolEvent

logger = logging.getLogger("echo_tools.history")

QUEUE_SIZE = 50_000  # events waiting for the writer before new ones are dropped
BATCH_SIZE = 1_000  # events written in one transaction at most
# how long the writer waits after a batch before taking the next when events keep coming (a batch within
# LINGER_S of the previous one; a `flush` or `close` cuts it short): under load the events of those milliseconds go into one transaction and are
# queued without waking the thread once each; an idle writer writes an event as soon as it comes
LINGER_S = 0.05
EXIT_FLUSH_S = 10.0  # how long the interpreter's exit waits for each writer

_STOP = object()
_OPEN: weakref.WeakSet[EventWriter] = weakref.WeakSet()


class EventWriter:
    """Hands events to `write_batch(events)` from one thread, in batches, in the order they were put.

    Args:
        write_batch: writes a list of events in one transaction (called on the writer thread).
        where: the history, named in log messages.
        queue_size: events that may wait before new ones are dropped.
    """

    def __init__(
        self, write_batch: Callable[[list[ToolEvent]], None], where: str, *, queue_size: int = QUEUE_SIZE
    ) -> None:
        self._write_batch = write_batch
        self.where = where
        self.dropped = 0  # events not kept: the queue was full, the writer closed, or a batch failed
        self._queue: queue.Queue[Any] = queue.Queue(queue_size)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._pending = 0  # events put and not yet written (or dropped)
        self._hurry = threading.Event()  # ends the writer's linger at once: `flush` or `close` waits
        _OPEN.add(self)

    def put(self, event: ToolEvent) -> None:
        """Queue one event for writing; drop it (counted, logged) when the queue is full or closed."""
        if self._thread is None:
            self._start()
        if self._closed:
            self._drop(1, "the history is closed")
            return
        with self._lock:
            self._pending += 1
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            with self._lock:
                self._pending -= 1
            self._drop(1, f"{self._queue.maxsize} events already wait to be written")

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event put so far is written; False when `timeout` passed first."""
        if self._pending == 0 or self._thread is None or threading.current_thread() is self._thread:
            return True  # nothing waits (a read right after a write of its own does not pay a round trip)
        if not self._thread.is_alive():
            return True
        done = threading.Event()
        try:
            self._queue.put(done, timeout=timeout)
        except queue.Full:
            return False
        self._hurry.set()
        return done.wait(timeout)

    def close(self, timeout: float | None = EXIT_FLUSH_S) -> None:
        """Write what is queued (waiting at most `timeout`), then stop the writer thread."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _OPEN.discard(self)
        thread = self._thread
        if thread is not None and thread.is_alive():
            try:
                self._queue.put(_STOP, timeout=timeout)
            except queue.Full:
                return
            self._hurry.set()
            thread.join(timeout)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name="echo-tools-history", daemon=True)
                self._thread.start()

    def _drop(self, count: int, why: str) -> None:
        with self._lock:
            self.dropped += count
            total = self.dropped
        if total == count or total // 1000 != (total - count) // 1000:  # the first, then every 1,000th
            logger.warning(
                "run history %s: %d event(s) not kept (%d so far): %s", self.where, count, total, why
            )

    def _run(self) -> None:
        last = 0.0  # when the previous batch was taken
        while True:
            item = self._queue.get()
            batch: list[ToolEvent] = []
            waiting: list[threading.Event] = []
            stop = False
            while True:
                if item is _STOP:
                    stop = True
                elif isinstance(item, threading.Event):
                    waiting.append(item)
                else:
                    batch.append(item)
                if stop or len(batch) >= BATCH_SIZE:
                    break
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
            if batch:
                try:
                    self._write_batch(batch)
                except Exception as exc:  # boundary: a failed batch is counted and logged, the writer goes on
                    self._drop(len(batch), f"writing them failed: {exc}")
                with self._lock:
                    self._pending -= len(batch)
            for done in waiting:
                done.set()
            if stop:
                return
            # events keep coming (this batch came within LINGER_S of the previous one): linger so the next
            # batch grows; after a quiet spell the next event is written as soon as it comes
            now = time.monotonic()
            busy, last = batch and now - last < LINGER_S, now
            if busy and self._hurry.wait(LINGER_S):  # `flush` or `close` waits: no lingering
                self._hurry.clear()


@atexit.register
def _flush_open_writers() -> None:
    for writer in list(_OPEN):
        writer.flush(EXIT_FLUSH_S)
