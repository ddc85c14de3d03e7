"""Tool events and the sinks that receive them.

A sink is any callable taking a `ToolEvent`. A sink that raises is logged and skipped: it never breaks
the call that emitted the event. Secrets in inputs and outputs are redacted before any sink sees them.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger("echo_tools.events")

EVENT_TYPES = ("tool.registered", "tool.invoked", "tool.completed", "tool.failed", "tool.timeout")

EventSink = Callable[["ToolEvent"], Any]

REDACTED = "***"

# A key is secret when one of its words is a secret word (`access_token`, `X-Api-Key`, `clientSecret`);
# plain substrings would also hide harmless keys such as `max_tokens` or `keyboard`.
_SECRET_WORDS = frozenset(
    {"token", "secret", "password", "passwd", "pwd", "passphrase", "authorization", "auth", "bearer",
     "credential", "credentials", "cookie", "apikey", "privatekey", "accesskey", "secretkey", "signature"}
)  # fmt: skip
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_NON_WORD = re.compile(r"[^a-z0-9]+")


@functools.lru_cache(maxsize=4096)  # events carry the same few keys over and over
def is_secret_key(key: str) -> bool:
    """True when a mapping key names a secret (`api_key`, `Authorization`, `refreshToken`)."""
    words = [w for w in _NON_WORD.split(_CAMEL.sub(r"\1_\2", key).lower()) if w]
    if any(w in _SECRET_WORDS for w in words):
        return True
    return any(pair in _SECRET_PAIRS for pair in itertools.pairwise(words))


def utc_now() -> str:
    """UTC time as ISO 8601 with a `Z` suffix."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def redact(value: Any, _depth: int = 0) -> Any:
    """A copy of `value` with the values of secret-looking keys replaced by `***`."""
    if _depth > 20:
        return value
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_key(k) else redact(v, _depth + 1))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v, _depth + 1) for v in value]
    return value


@dataclass
class ToolEvent:
    """One thing that happened to a tool; the context ids are plain attributes."""

    type: str
    tool_id: str | None = None
    tool_name: str | None = None
    tool_type: str | None = None
    agent_id: str | None = None
    workflow_id: str | None = None
    run_id: str | None = None
    node_id: str | None = None
    tool_call_id: str | None = None
    trace_id: str | None = None
    input: Any = None
    output: Any = None
    error: str | None = None
    error_type: str | None = None
    duration_ms: float | None = None
    attempts: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    event_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    timestamp: str = field(default_factory=utc_now)

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON-ready dict (keys with `None` values left out)."""
        return {k: v for k, v in asdict(self).items() if v is not None and v != {}}

    def to_json(self) -> str:
        """The event as one line of JSON (values JSON cannot hold are written with `str`)."""
        return json.dumps(self.to_dict(), default=str, ensure_ascii=False)


class MemoryEventLog:
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
    """The sinks of one registry or executor; `emit` delivers to each and isolates their failures."""

    def __init__(self, sinks: Iterable[EventSink] = ()) -> None:
        self.sinks: list[EventSink] = list(sinks)

    def add(self, sink: EventSink) -> None:
        """Deliver future events to `sink` too."""
        self.sinks.append(sink)

    def remove(self, sink: EventSink) -> None:
        """Stop delivering to `sink` (no error when it was not added)."""
        if sink in self.sinks:
            self.sinks.remove(sink)

    def emit(self, event: ToolEvent) -> None:
        """Redact the event's input, output and metadata, then hand it to every sink in order."""
        sinks = tuple(self.sinks)  # a sink added or removed meanwhile does not disturb this delivery
        if not sinks:
            return
        event.input = redact(event.input)
        event.output = redact(event.output)
        event.metadata = redact(event.metadata)
        for sink in sinks:
            try:
                sink(event)
            except Exception:  # boundary: a broken sink must never break a tool call
                logger.exception("event sink %r raised on %s", sink, event.type)
