"""Live tool events for HTTP clients (Server-Sent Events) and executor metrics in Prometheus text format.

One `EventBroadcaster` is an executor sink; each `/tools/events` client gets its own bounded queue (a slow
client loses its oldest events, counted, and never slows a tool call down). Sinks are called from any
thread, so a client is woken through its own loop's `call_soon_threadsafe`.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from echo_tools.events import ToolEvent

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def format_sse(event: str, data: Any, event_id: str | None = None) -> str:
    """One Server-Sent Events frame; `data` is JSON on a single line."""
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n"


class EventClient:
    """The bounded queue of one stream; `offer` from any thread, `next_batch` on the client's loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int, run_id: str | None) -> None:
        self.loop = loop
        self.run_id = run_id
        self.dropped = 0
        self._items: deque[dict[str, Any]] = deque(maxlen=size)
        self._lock = threading.Lock()
        self._ready = asyncio.Event()

    def offer(self, item: dict[str, Any]) -> None:
        with self._lock:
            if len(self._items) == self._items.maxlen:
                self.dropped += 1  # the deque drops the oldest item itself
            self._items.append(item)
        try:
            self.loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:
            pass  # the client's loop is closed: the stream has ended

    async def next_batch(self, timeout: float) -> list[dict[str, Any]]:
        """The queued items (waiting up to `timeout` seconds for the first); empty at the timeout."""
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return []
        with self._lock:
            self._ready.clear()
            items = list(self._items)
            self._items.clear()
        return items


class EventBroadcaster:
    """A sink fanning tool events out to the connected stream clients, filtered by `run_id`."""

    def __init__(self, queue_size: int = 1000) -> None:
        self.queue_size = queue_size
        self.published = 0
        self._clients: set[EventClient] = set()
        self._lock = threading.Lock()
        # the registry and the executor may both deliver one event; deliver it once
        self._recent: deque[str] = deque(maxlen=512)
        self._recent_set: set[str] = set()

    def __call__(self, event: ToolEvent) -> None:
        with self._lock:
            if event.event_id in self._recent_set:
                return
            if len(self._recent) == self._recent.maxlen:
                self._recent_set.discard(self._recent[0])
            self._recent.append(event.event_id)
            self._recent_set.add(event.event_id)
            self.published += 1
            clients = [c for c in self._clients if c.run_id is None or c.run_id == event.run_id]
        if clients:
            data = event.to_dict()
            for client in clients:
                client.offer(data)

    @property
    def client_count(self) -> int:
        return len(self._clients)

    @property
    def dropped(self) -> int:
        with self._lock:
            return sum(c.dropped for c in self._clients)

    @contextmanager
    def subscribe(self, run_id: str | None = None) -> Iterator[EventClient]:
        """A client queue receiving every later event (of `run_id` only, when given) until the block ends."""
        client = EventClient(asyncio.get_running_loop(), self.queue_size, run_id)
        with self._lock:
            self._clients.add(client)
        try:
            yield client
        finally:
            with self._lock:
                self._clients.discard(client)


async def event_stream(
    broadcaster: EventBroadcaster, run_id: str | None, ping_seconds: float, max_events: int | None
) -> AsyncIterator[str]:
    """The SSE frames of one `/tools/events` client: a `ready` frame once subscribed, then the events."""
    with broadcaster.subscribe(run_id) as client:
        yield format_sse("ready", {"run_id": run_id})
        sent = 0
        while max_events is None or sent < max_events:
            batch = await client.next_batch(ping_seconds)
            if not batch:
                yield ": ping\n\n"
                continue
            for item in batch:
                yield format_sse(item.get("type", "tool.event"), item, item.get("event_id"))
                sent += 1
                if max_events is not None and sent >= max_events:
                    break


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
