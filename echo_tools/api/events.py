"""Live tool events for HTTP clients (Server-Sent Events) and executor metrics in Prometheus text format.

One `EventBroadcaster` is an executor sink. Each event is serialised once into an SSE frame and appended to
one shared window, bounded in events (`queue_size`) and in bytes (`max_bytes`); every `/tools/events`
client reads the window from its own cursor, and sees only the events of its principal's calls unless it is
an admin's (`viewer` None). Publishing is O(1) in the number of clients (one wake-up per
event loop per 50 ms, never a copy per client), a slow or stalled client pins nothing (it finds a `dropped` frame
saying how many events it missed), and at most `max_clients` streams are open (the next gets 503).
Sinks are called from any thread; clients are woken through their loop's `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from echo_tools.events import InlineSink, ToolEvent

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
DEFAULT_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_CLIENTS = 100
COALESCE_SECONDS = 0.05  # events published within this delay reach the clients in one wake-up
_BULKY = ("input", "output", "error")


def format_sse(event: str, data: Any, event_id: str | None = None) -> str:
    """One Server-Sent Events frame; `data` is JSON on a single line."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n"


class TooManyClientsError(Exception):
    """Every event-stream slot is taken."""


@dataclass(frozen=True)
class _Entry:
    seq: int
    run_id: str | None
    principal: str | None
    data: dict[str, Any]
    frame: str
    size: int


class _LoopWaker:
    """The clients of one event loop wait on one future; a publish resolves it once for all of them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] | None = None
        self.scheduled = False
        self.clients = 0

    def waiter(self) -> asyncio.Future[None]:
        if self.future is None or self.future.done():
            self.future = self.loop.create_future()
        return self.future

    def wake(self) -> None:
        self.scheduled = False
        future, self.future = self.future, None
        if future is not None and not future.done():
            future.set_result(None)

    def poke(self) -> None:
        """From any thread: wake this loop's waiting clients once (no-op when nobody waits)."""
        if self.future is None or self.scheduled:
            return
        self.scheduled = True
        try:
            self.loop.call_soon_threadsafe(self.loop.call_later, COALESCE_SECONDS, self.wake)
        except RuntimeError:
            self.scheduled = False  # the loop is closed: its streams have ended


class EventClient:
    """One stream's cursor into the broadcaster's window; read on the client's own loop."""

    def __init__(
        self, broadcaster: EventBroadcaster, waker: _LoopWaker, run_id: str | None, viewer: str | None = None
    ) -> None:
        self.broadcaster = broadcaster
        self.waker = waker
        self.run_id = run_id
        self.viewer = viewer  # the principal whose calls' events it sees; None: every event (an admin)
        self.cursor = broadcaster.next_seq
        self.dropped = 0
        self.pending_drop = 0  # missed events not yet announced to the stream

    async def next_entries(self, timeout: float) -> list[_Entry]:
        """The events for this client (waiting up to `timeout` seconds for the first); empty at the timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            waiter = self.waker.waiter()  # before reading: a publish after the read will resolve it
            entries = self.broadcaster.read(self)
            if entries or self.pending_drop:
                return entries
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await asyncio.wait({waiter}, timeout=remaining)  # never cancels the shared future

    async def next_batch(self, timeout: float) -> list[dict[str, Any]]:
        """The events' dicts (shared and read-only), as `next_entries`."""
        return [entry.data for entry in await self.next_entries(timeout)]


class EventBroadcaster(InlineSink):
    """A sink fanning tool events out to the connected stream clients, filtered by `run_id`.

    Inline (called in the emitting thread, even on a loop): with no client it only counts the event, and
    with clients it serialises it once and appends it to the window, so no thread hand-off is worth more.

    Args:
        queue_size: events kept in the shared window for clients that have not read them yet.
        max_bytes: bytes of serialised frames the window may hold; an event whose frame alone is over a
            quarter of it is sent without its input, output and error (marked `omitted`).
        max_clients: open streams at most; `subscribe` raises `TooManyClientsError` beyond.
    """

    def __init__(
        self,
        queue_size: int = 1000,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_clients: int = DEFAULT_MAX_CLIENTS,
    ) -> None:
        self.queue_size = queue_size
        self.max_bytes = max_bytes
        self.max_clients = max_clients
        self.published = 0
        self.dropped_total = 0
        self.next_seq = 0
        self._window: deque[_Entry] = deque()
        self._bytes = 0
        self._clients: set[EventClient] = set()
        self._listeners = 0  # streams holding a slot that read no tool events (the run viewer's list)
        self._wakers: dict[asyncio.AbstractEventLoop, _LoopWaker] = {}
        self._lock = threading.Lock()
        # the registry and the executor may both deliver one event; deliver it once
        self._recent: deque[str] = deque(maxlen=512)
        self._recent_set: set[str] = set()

    def __call__(self, event: ToolEvent) -> None:
        event_id = event.event_id  # made text on first read: read once
        with self._lock:
            if event_id in self._recent_set:
                return
            if len(self._recent) == self._recent.maxlen:
                self._recent_set.discard(self._recent[0])
            self._recent.append(event_id)
            self._recent_set.add(event_id)
            self.published += 1
            if not self._clients:
                return  # nobody listens: nothing is serialised or kept
        entry_data = event.to_dict()
        frame = format_sse(entry_data.get("type", "tool.event"), entry_data, entry_data.get("event_id"))
        size = len(frame.encode("utf-8"))
        if size > self.max_bytes // 4:
            omitted = [k for k in _BULKY if k in entry_data]
            entry_data = {k: v for k, v in entry_data.items() if k not in _BULKY}
            entry_data["omitted"] = f"{', '.join(omitted)}: {size} bytes, over the stream's frame limit"
            frame = format_sse(entry_data.get("type", "tool.event"), entry_data, entry_data.get("event_id"))
            size = len(frame.encode("utf-8"))
        with self._lock:
            entry = _Entry(self.next_seq, event.run_id, event.principal, entry_data, frame, size)
            self.next_seq += 1
            self._window.append(entry)
            self._bytes += size
            while len(self._window) > self.queue_size or self._bytes > self.max_bytes:
                self._bytes -= self._window.popleft().size
            wakers = list(self._wakers.values())
        for waker in wakers:
            waker.poke()

    def read(self, client: EventClient) -> list[_Entry]:
        """The window's events after `client`'s cursor (of its run), moving the cursor past them."""
        with self._lock:
            first = self._window[0].seq if self._window else self.next_seq
            if client.cursor < first:
                missed = first - client.cursor
                client.dropped += missed
                client.pending_drop += missed
                self.dropped_total += missed
                client.cursor = first
            start = client.cursor - first
            client.cursor = self.next_seq
            entries = itertools.islice(self._window, start, None)
            run_id, viewer = client.run_id, client.viewer
            if run_id is None and viewer is None:
                return list(entries)
            return [
                e
                for e in entries
                if (run_id is None or e.run_id == run_id) and (viewer is None or e.principal == viewer)
            ]

    @property
    def client_count(self) -> int:
        return len(self._clients) + self._listeners

    @property
    def dropped(self) -> int:
        """Events that left the window before a client read them, summed over clients."""
        return self.dropped_total

    def add_client(self, run_id: str | None = None, viewer: str | None = None) -> EventClient:
        """Register a stream on the running loop (seeing the events of `viewer`'s calls only, when given);
        `remove_client` ends it.

        Raises:
            TooManyClientsError: `max_clients` streams are open.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            self._refuse_when_full()
            waker = self._wakers.get(loop)
            if waker is None:
                waker = self._wakers[loop] = _LoopWaker(loop)
            waker.clients += 1
            client = EventClient(self, waker, run_id, viewer)
            self._clients.add(client)
        return client

    def _refuse_when_full(self) -> None:
        if len(self._clients) + self._listeners >= self.max_clients:
            raise TooManyClientsError(
                f"The event stream has {len(self._clients) + self._listeners} clients, its limit "
                f"(max_clients {self.max_clients}); close one or try again later"
            )

    def add_listener(self) -> None:
        """Take a stream slot for a stream that reads no tool events (counted against `max_clients`);
        `remove_listener` gives it back.

        Raises:
            TooManyClientsError: `max_clients` streams are open.
        """
        with self._lock:
            self._refuse_when_full()
            self._listeners += 1

    def remove_listener(self) -> None:
        with self._lock:
            self._listeners = max(0, self._listeners - 1)

    def remove_client(self, client: EventClient) -> None:
        with self._lock:
            if client not in self._clients:
                return
            self._clients.discard(client)
            client.waker.clients -= 1
            if client.waker.clients == 0:
                self._wakers.pop(client.waker.loop, None)

    @contextmanager
    def subscribe(self, run_id: str | None = None, viewer: str | None = None) -> Iterator[EventClient]:
        """A client receiving every later event (of `run_id` only, of `viewer`'s calls only, when given)
        until the block ends."""
        client = self.add_client(run_id, viewer)
        try:
            yield client
        finally:
            self.remove_client(client)


def event_stream(
    broadcaster: EventBroadcaster,
    run_id: str | None,
    ping_seconds: float,
    max_events: int | None,
    viewer: str | None = None,
) -> AsyncIterator[str]:
    """The SSE frames of one `/tools/events` client: a `ready` frame once subscribed, then the events.

    The slot is taken now, so a full broadcaster answers 503 before the response starts; it is given
    back when the stream ends, or when the stream is dropped without ever being iterated.

    Raises:
        ApiError: 503 when `max_clients` streams are open.
    """
    from echo_tools.api.errors import ApiError

    try:
        client = broadcaster.add_client(run_id, viewer)
    except TooManyClientsError as exc:
        raise ApiError(503, "unavailable", str(exc), field="max_clients") from exc
    stream = _frames(broadcaster, client, ping_seconds, max_events)
    weakref.finalize(stream, broadcaster.remove_client, client)
    return stream


async def _frames(
    broadcaster: EventBroadcaster, client: EventClient, ping_seconds: float, max_events: int | None
) -> AsyncIterator[str]:
    try:
        yield format_sse("ready", {"run_id": client.run_id})
        sent = 0
        while max_events is None or sent < max_events:
            entries = await client.next_entries(ping_seconds)
            if client.pending_drop:
                yield format_sse("dropped", {"dropped": client.pending_drop, "reason": "client too slow"})
                client.pending_drop = 0
            elif not entries:
                yield ": ping\n\n"
            if max_events is not None:
                entries = entries[: max_events - sent]
            if entries:
                sent += len(entries)
                yield "".join(entry.frame for entry in entries)  # one write per wake-up, not per event
    finally:
        broadcaster.remove_client(client)


def _label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


_PER_TOOL = {
    "calls": ("echo_tools_tool_calls_total", "counter", "Finished calls per tool."),
    "failures": ("echo_tools_tool_failures_total", "counter", "Failed calls per tool (timeouts included)."),
    "timeouts": ("echo_tools_tool_timeouts_total", "counter", "Calls per tool stopped at their timeout."),
    "max_ms": ("echo_tools_tool_latency_max_ms", "gauge", "Slowest recent call per tool, in milliseconds."),
}
_QUANTILES = {"p50_ms": "0.5", "p95_ms": "0.95", "p99_ms": "0.99"}


def prometheus_text(per_tool: Mapping[str, Mapping[str, Any]], gauges: Mapping[str, float]) -> str:
    """Prometheus exposition text of `executor.metrics()` plus a few process-wide gauges."""
    lines: list[str] = []
    keys = sorted({k for stats in per_tool.values() for k in stats})
    for key in keys:
        if key in _QUANTILES:
            continue
        name, kind, help_text = _PER_TOOL.get(key, (f"echo_tools_tool_{key}", "gauge", f"Per-tool {key}."))
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for tool_id in sorted(per_tool):
            value = per_tool[tool_id].get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                lines.append(f'{name}{{tool_id="{_label(tool_id)}"}} {value}')
    if any(q in keys for q in _QUANTILES):
        name = "echo_tools_tool_latency_ms"
        lines += [
            f"# HELP {name} Recent call latency quantiles per tool, in milliseconds.",
            f"# TYPE {name} gauge",
        ]
        for tool_id in sorted(per_tool):
            for key, quantile in _QUANTILES.items():
                value = per_tool[tool_id].get(key)
                if isinstance(value, (int, float)):
                    lines.append(f'{name}{{tool_id="{_label(tool_id)}",quantile="{quantile}"}} {value}')
    for name, value in sorted(gauges.items()):
        kind = "counter" if name.endswith("_total") else "gauge"
        lines += [f"# TYPE {name} {kind}", f"{name} {value}"]
    return "\n".join(lines) + "\n"
