"""Tool events, the one event bus that delivers them, and the built-in sinks.

A sink is any callable taking a `ToolEvent`. A sink that raises is logged and skipped: it never breaks
the call that emitted the event. Secrets in inputs, outputs and metadata are redacted before any sink sees
them. An event emitted on an event loop reaches ordinary sinks from the bus's own delivery thread, through
a bounded queue, so a slow sink never stalls the loop (when the queue is full the event is dropped for
those sinks and counted in `EventBus.dropped`); `InlineSink`s and events emitted from plain threads are
delivered in place, in order.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from echo_tools.models import ToolContext
from echo_tools.redaction import REDACTED, is_secret_key, redact

__all__ = [
    "EVENT_TYPES",
    "REDACTED",
    "EventBus",
    "EventSink",
    "InlineSink",
    "JsonlEventLog",
    "LoggingEventSink",
    "MemoryEventLog",
    "ToolEvent",
    "call_fields",
    "format_timestamp",
    "format_call_id",
    "new_call_id",
    "is_secret_key",
    "redact",
    "utc_now",
]

logger = logging.getLogger("echo_tools.events")

EVENT_TYPES = (
    "tool.registered",
    "tool.invoked",
    "tool.completed",
    "tool.failed",
    "tool.timeout",
    # what an MCP server says or asks during a call: progress and log notifications, sampling and
    # elicitation requests (the answer's text is never in the event)
    "tool.progress",
    "tool.log",
    "tool.sampling",
    "tool.elicitation",
    # one chunk of a streaming tool's output (a generator tool, `echo_tools.streaming`)
    "tool.output.delta",
)

EventSink = Callable[["ToolEvent"], Any]

QUEUE_SIZE = 10_000  # events waiting for the delivery thread; beyond it they are dropped and counted
# how long the delivery thread stays awake after a round, so events that follow within it are handed off
# without waking it: under load a round delivers every event of a few milliseconds, not one
LINGER_S = 0.005
REMOVE_WAIT_S = 5.0

_ID_PREFIX = os.urandom(10).hex()
_ID_COUNTER = itertools.count(1)
_second = (0, "")  # (epoch second, its text): one strftime per second, not per event
_SCALARS = (str, int, float, bool, type(None))


def format_timestamp(now: float) -> str:
    """`now` (epoch seconds) as ISO 8601 UTC with microseconds and a `Z` suffix."""
    global _second
    second = int(now)
    cached, prefix = _second
    if cached != second:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (second, prefix)
    return f"{prefix}.{int((now - second) * 1_000_000):06d}Z"


def utc_now() -> str:
    """The current UTC time as ISO 8601 with microseconds and a `Z` suffix."""
    return format_timestamp(time.time())


def new_call_id() -> str:
    """A call's id (what its events carry as `call_id`): like an event id, from its own counter."""
    return format_call_id(next_call_number())


_CALL_COUNTER = itertools.count(1)
next_call_number = _CALL_COUNTER.__next__  # a call's number; its events format it only when read


def format_call_id(number: int) -> str:
    """The text of call number `number`: 32 hex digits, as event ids."""
    return f"{_ID_PREFIX}{number & 0xFFFFFFFFFFFF:012x}"


def _new_id_prefix() -> None:
    # a forked child would otherwise repeat its parent's ids, and a history keyed by event id would merge them
    global _ID_PREFIX
    _ID_PREFIX = os.urandom(10).hex()


os.register_at_fork(after_in_child=_new_id_prefix)


_format_event_id = format_call_id  # event ids are written as call ids are, from their own counter
_next_event_number = _ID_COUNTER.__next__


class _Deferred:
    """A field kept as captured (a number, a clock reading) and made text the first time it is read.

    Like `logging.LogRecord`, an event notes its moment and its numbers when it is made and formats them
    only if a sink looks: most events of a fast call are never read field by field.
    """

    def __init__(self, name: str, render: Callable[[Any], str]) -> None:
        self._slot = f"_{name}"  # where the captured value, then its text, is kept
        self._render = render

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = getattr(obj, self._slot)
        if value is not None and type(value) is not str:
            value = self._render(value)
            setattr(obj, self._slot, value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self._slot, value)


@dataclass(init=False)
class ToolEvent:
    """One thing that happened to a tool; the context ids are plain attributes.

    Fields not given are None (`metadata`: an empty dict); `event_id` and `timestamp` are filled in.
    """

    # slots and a hand-written __init__: events are made twice per call, and the generated __init__
    # costs half as much again
    __slots__ = (
        "_call_id", "_event_id", "_timestamp", "agent_id", "agent_name", "attempts", "cached", "duration_ms",
        "error", "error_type", "input", "metadata", "node_id", "output", "parent_call_id", "principal",
        "run_id", "tool_call_id", "tool_id", "tool_name", "tool_type", "trace_id", "type", "user_id",
        "workflow_id",
    )  # fmt: skip

    type: str
    tool_id: str | None
    tool_name: str | None
    tool_type: str | None
    agent_id: str | None
    agent_name: str | None  # the calling agent's canvas name, when its context gave one
    workflow_id: str | None
    run_id: str | None
    node_id: str | None
    tool_call_id: str | None
    trace_id: str | None
    call_id: str | None  # the call this event belongs to (its number until read, or given as text)
    parent_call_id: str | None  # the composite call (skill, workflow, agent) that made it, if any
    principal: str | None  # who called (the gate's principal name), when its context named one
    user_id: str | None  # the end user the call was made for, if any
    input: Any
    output: Any
    error: str | None
    error_type: str | None
    duration_ms: float | None
    attempts: int | None
    cached: bool | None  # a `tool.completed` answered from the executor's result cache
    metadata: dict[str, Any]
    event_id: str  # its number until read
    timestamp: str  # the clock reading until read

    def __init__(
        self,
        type: str,
        tool_id: str | None = None,
        tool_name: str | None = None,
        tool_type: str | None = None,
        agent_id: str | None = None,
        agent_name: str | None = None,
        workflow_id: str | None = None,
        run_id: str | None = None,
        node_id: str | None = None,
        tool_call_id: str | None = None,
        trace_id: str | None = None,
        call_id: str | int | None = None,
        parent_call_id: str | None = None,
        principal: str | None = None,
        user_id: str | None = None,
        input: Any = None,
        output: Any = None,
        error: str | None = None,
        error_type: str | None = None,
        duration_ms: float | None = None,
        attempts: int | None = None,
        cached: bool | None = None,
        metadata: dict[str, Any] | None = None,
        event_id: str | None = None,
        timestamp: str | None = None,
    ) -> None:
        self.type = type
        self.tool_id = tool_id
        self.tool_name = tool_name
        self.tool_type = tool_type
        self.agent_id = agent_id
        self.agent_name = agent_name
        self.workflow_id = workflow_id
        self.run_id = run_id
        self.node_id = node_id
        self.tool_call_id = tool_call_id
        self.trace_id = trace_id
        self._call_id = call_id
        self.parent_call_id = parent_call_id
        self.principal = principal
        self.user_id = user_id
        self.input = input
        self.output = output
        self.error = error
        self.error_type = error_type
        self.duration_ms = duration_ms
        self.attempts = attempts
        self.cached = cached
        self.metadata = {} if metadata is None else metadata
        self._event_id = _next_event_number() if event_id is None else event_id
        self._timestamp = time.time() if timestamp is None else timestamp

    def to_dict(self) -> dict[str, Any]:
        """The event's fields as a dict, leaving out those that are None or empty (values not copied)."""
        out = {}
        for name in _FIELD_NAMES:
            value = getattr(self, name)
            if value is not None and value != {}:
                out[name] = value
        return out

    def to_json(self) -> str:
        """The event as one line of JSON (values JSON cannot hold are written with `str`)."""
        return json.dumps(self.to_dict(), default=str, ensure_ascii=False)


# made text when first read (set after the dataclass is made: as class attributes they would be defaults)
for _name, _render in (
    ("call_id", format_call_id),
    ("event_id", _format_event_id),
    ("timestamp", format_timestamp),
):
    setattr(ToolEvent, _name, _Deferred(_name, _render))
del _name, _render

_FIELD_NAMES = tuple(f.name for f in fields(ToolEvent))


def call_fields(
    tool_id: str | None,
    tool_name: str | None,
    tool_type: str | None,
    context: ToolContext | None,
    call_id: str | int | None = None,
) -> dict[str, Any]:
    """The fields every event of one call shares: the tool, the call's id and the caller's context ids.

    Without a context the ids are left out: they read as None all the same.
    """
    if context is None:
        return {"tool_id": tool_id, "tool_name": tool_name, "tool_type": tool_type, "call_id": call_id}
    return {
        "tool_id": tool_id,
        "tool_name": tool_name,
        "tool_type": tool_type,
        "call_id": call_id,
        "parent_call_id": context.parent_call_id,
        "agent_id": context.agent_id,
        "agent_name": context.agent_name,
        "workflow_id": context.workflow_id,
        "run_id": context.run_id,
        "node_id": context.node_id,
        "tool_call_id": context.tool_call_id,
        "trace_id": context.trace_id,
        "principal": context.principal,
        "user_id": context.user_id,
    }


class InlineSink:
    """Base of sinks delivered in the emitting thread even on an event loop: cheap, never blocking, and
    needing the caller's thread or context variables (an in-memory log, a stream writer)."""


class MemoryEventLog(InlineSink):
    """Keeps every event in memory, in order: `.events` is the list."""

    def __init__(self) -> None:
        self.events: list[ToolEvent] = []

    def __call__(self, event: ToolEvent) -> None:
        self.events.append(event)

    def of_type(self, event_type: str) -> list[ToolEvent]:
        """The events of one type (`tool.completed` ...), in order."""
        return [e for e in self.events if e.type == event_type]

    def clear(self) -> None:
        """Forget every event."""
        self.events.clear()


class JsonlEventLog:
    """Appends each event as one JSON line to `path` (thread-safe within a process)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def __call__(self, event: ToolEvent) -> None:
        line = event.to_json() + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as fh:
            fh.write(line)


class LoggingEventSink:
    """Writes each event to a `logging` logger (INFO; failures and timeouts at WARNING)."""

    def __init__(self, logger_name: str = "echo_tools.events") -> None:
        self._logger = logging.getLogger(logger_name)

    def __call__(self, event: ToolEvent) -> None:
        level = logging.WARNING if event.type in ("tool.failed", "tool.timeout") else logging.INFO
        self._logger.log(level, "%s %s %s", event.type, event.tool_id, event.error or "")


class EventBus:
    """The sinks of one registry or executor; `emit` redacts, then delivers to each and isolates failures.

    Args:
        sinks: the first sinks (more via `add`).
        queue_size: events that may wait for the delivery thread before new ones are dropped.
    """

    def __init__(self, sinks: Iterable[EventSink] = (), queue_size: int = QUEUE_SIZE) -> None:
        self.sinks: list[EventSink] = []
        self.dropped = 0  # events not delivered to the background sinks because the queue was full
        self._inline: list[EventSink] = []
        # what `emit` delivers, split once per change of sinks rather than on every event
        self._all: tuple[EventSink, ...] = ()
        self._in_place: tuple[EventSink, ...] = ()  # inline sinks: in the emitting thread, even on a loop
        self._later: tuple[EventSink, ...] = ()  # the others: from the delivery thread when on a loop
        # handed off in batches: an emitter appends (atomic, no lock) and wakes the delivery thread only
        # when it is not already awake; the thread delivers everything queued, stays awake `LINGER_S` for
        # more, then sleeps again. An entry leaves the queue once delivered, so `_pending` counts the one
        # in delivery too.
        self._queue: deque[tuple[tuple[EventSink, ...], Any]] = deque()
        self._wake = threading.Event()
        self._hurry = threading.Event()  # ends a linger at once: someone waits for the queue (`flush`)
        self.queue_size = queue_size
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()  # starting the thread, and counting drops
        for sink in sinks:
            self.add(sink)

    @property
    def _pending(self) -> int:
        """Events queued and not yet delivered."""
        return len(self._queue)

    def add(self, sink: EventSink, *, inline: bool | None = None) -> None:
        """Deliver future events to `sink` too.

        Args:
            sink: the callable.
            inline: deliver in the emitting thread even on an event loop; default: when `sink` is an
                `InlineSink`. Say True only for a sink that never blocks.
        """
        self.sinks.append(sink)
        if inline or (inline is None and isinstance(sink, InlineSink)):
            self._inline.append(sink)
        self._split()

    def remove(self, sink: EventSink) -> None:
        """Stop delivering to `sink`, once it has received every event emitted before (waiting at most
        `REMOVE_WAIT_S` for a slow sink; no error when it was not added)."""
        if sink in self.sinks:
            self.flush(REMOVE_WAIT_S)
            self.sinks.remove(sink)
        if sink in self._inline:
            self._inline.remove(sink)
        self._split()

    def _split(self) -> None:
        inline = self._inline
        self._in_place = tuple(s for s in self.sinks if s in inline)
        self._later = tuple(s for s in self.sinks if s not in inline)
        self._all = tuple(self.sinks)

    def emit(
        self, event: ToolEvent, flat_keys: frozenset[str] = frozenset(), *, on_loop: bool = False
    ) -> None:
        """Redact the event's input, output and metadata, then hand it to every sink in order.

        Args:
            event: the event (its input, output and metadata are replaced by redacted copies as needed).
            flat_keys: input keys known to be harmless and typed scalar (the input passed a schema saying
                so): an input made only of them needs no look.
            on_loop: the caller runs on an event loop: sinks that are not inline get the event from the
                delivery thread, so none of them can stall the loop.
        """
        sinks = self._all  # a sink added or removed meanwhile does not disturb this delivery
        if not sinks:
            return
        value = event.input
        if value is not None and not (type(value) is dict and flat_keys.issuperset(value)):
            event.input = redact(value)
        if not isinstance(event.output, _SCALARS):
            event.output = redact(event.output)
        if event.metadata:
            event.metadata = redact(event.metadata)
        if not on_loop and not self._pending:
            _deliver(sinks, event)
            return
        # on a loop, or behind events still queued (delivered in place it would overtake them): queue it
        later = self._later
        if self._in_place:
            _deliver(self._in_place, event)
        if later:
            self._enqueue(later, event)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event queued so far reached its sinks; False when `timeout` passed first."""
        if self._worker is None or threading.current_thread() is self._worker:
            return True
        done = threading.Event()
        self._queue.append(((), done))
        self._wake.set()
        self._hurry.set()
        return done.wait(timeout)

    def _enqueue(self, sinks: tuple[EventSink, ...], event: ToolEvent) -> None:
        if self._worker is None:
            with self._lock:
                if self._worker is None:
                    self._worker = threading.Thread(target=self._drain, name="echo-tools-events", daemon=True)
                    self._worker.start()
        # one in delivery and `queue_size` waiting, as a bounded queue behind a busy consumer
        if len(self._queue) > self.queue_size:
            with self._lock:
                self.dropped += 1
                first = self.dropped == 1
            if first:
                logger.warning(
                    "event queue full (%d events): a sink is slower than the calls; dropping events "
                    "(counted in EventBus.dropped)",
                    self.queue_size,
                )
            return
        self._queue.append((sinks, event))
        if not self._wake.is_set():  # the thread sleeps: wake it (once for everything queued meanwhile)
            self._wake.set()

    def _drain(self) -> None:
        queue, wake, hurry = self._queue, self._wake, self._hurry
        while True:
            wake.wait()
            while wake.is_set():  # rounds until one lingers without a new event
                wake.clear()  # before reading: an event appended from now on marks another round
                while queue:
                    sinks, item = queue[0]
                    if isinstance(item, threading.Event):
                        item.set()
                    else:
                        _deliver(sinks, item)
                    queue.popleft()  # after delivery: `_pending` still counted it while it was delivered
                    del sinks, item  # keep nothing alive while idle
                # awake a little longer: what an emitter appends meanwhile only sets the flag (no waiter
                # to wake, no thread switch) and is delivered in the next round
                if hurry.wait(LINGER_S):
                    hurry.clear()


def _deliver(sinks: tuple[EventSink, ...], event: ToolEvent) -> None:
    for sink in sinks:
        try:
            sink(event)
        except Exception:  # boundary: a broken sink must never break a tool call
            logger.exception("event sink %r raised on %s", sink, event.type)
