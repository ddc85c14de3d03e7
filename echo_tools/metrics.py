"""What an executor records about each call: per-tool metrics, the call events, the results and outputs.

Metrics: counts of calls, failures and timeouts, and latency percentiles from a bounded reservoir per tool
(the most recent `RESERVOIR` calls). Events and results are built cheaply: two events and a result go
out on every call, and for a small tool they would otherwise cost more than the rest of the pipeline.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import itertools
import logging
import os
import threading
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from echo_tools.events import REDACTED, EventBus, ToolEvent, redact
from echo_tools.models import ToolContext, ToolResult

logger = logging.getLogger("echo_tools.events")

RESERVOIR = 2048
NO_CONTEXT = ToolContext()  # the context of calls made without one (never changed)


class _ToolStats:
    __slots__ = ("calls", "failures", "latencies", "timeouts")

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self.timeouts = 0
        self.latencies: deque[float] = deque(maxlen=RESERVOIR)


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of an ascending list (0.0 for an empty one)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


class MetricsRecorder:
    """Thread-safe counters and latency reservoirs, keyed by tool id."""

    def __init__(self) -> None:
        self._stats: dict[str, _ToolStats] = {}
        self._lock = threading.Lock()

    def record(self, tool_id: str, duration_ms: float, error_type: str | None) -> None:
        """Count one finished call of `tool_id` (error_type None when it succeeded)."""
        with self._lock:
            stats = self._stats.get(tool_id)
            if stats is None:
                stats = self._stats[tool_id] = _ToolStats()
            stats.calls += 1
            if error_type is not None:
                stats.failures += 1
                if error_type == "timeout":
                    stats.timeouts += 1
            stats.latencies.append(duration_ms)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """`{tool_id: {calls, failures, timeouts, p50_ms, p95_ms, p99_ms, max_ms}}`."""
        with self._lock:
            copied = {
                tool_id: (s.calls, s.failures, s.timeouts, sorted(s.latencies))
                for tool_id, s in self._stats.items()
            }
        out: dict[str, dict[str, Any]] = {}
        for tool_id, (calls, failures, timeouts, latencies) in copied.items():
            out[tool_id] = {
                "calls": calls,
                "failures": failures,
                "timeouts": timeouts,
                "p50_ms": round(percentile(latencies, 0.50), 4),
                "p95_ms": round(percentile(latencies, 0.95), 4),
                "p99_ms": round(percentile(latencies, 0.99), 4),
                "max_ms": round(latencies[-1], 4) if latencies else 0.0,
            }
        return out

    def reset(self) -> None:
        with self._lock:
            self._stats.clear()


# -- call events, built on the hot path -------------------------------------------------------------

_ID_PREFIX = os.urandom(10).hex()
_ID_COUNTER = itertools.count(1)
_second_cache: tuple[int, str] = (0, "")
_MISSING = object()
_new = object.__new__
_time = time.time
_FIELD_NAMES = tuple(f.name for f in dataclasses.fields(ToolEvent))
# The fast construction below fills the instance dict directly; it is only safe for a plain dataclass.
_FAST = (
    not hasattr(ToolEvent, "__slots__")
    and not hasattr(ToolEvent, "__post_init__")
    and {"event_id", "timestamp", "metadata"} <= set(_FIELD_NAMES)
    and all(
        getattr(ToolEvent, f.name, _MISSING) is None
        for f in dataclasses.fields(ToolEvent)
        if f.name not in ("type", "event_id", "timestamp", "metadata")
    )
)


def format_timestamp(now: float) -> str:
    """`now` (epoch seconds) as ISO 8601 UTC with microseconds and `Z`, like `events.utc_now`."""
    global _second_cache
    second = int(now)
    cached_second, prefix = _second_cache
    if cached_second != second:
        prefix = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second_cache = (second, prefix)
    return f"{prefix}.{int((now - second) * 1_000_000):06d}Z"


def format_event_id(number: int) -> str:
    """32 hex digits: a random per-process prefix and a counter, unique across processes."""
    return f"{_ID_PREFIX}{number & 0xFFFFFFFFFFFF:012x}"


class CallEvent(ToolEvent):
    """A `ToolEvent` whose `event_id` and `timestamp` are formatted on first read.

    Like `logging.LogRecord`, the moment is captured when the event is made and turned into text only if
    a sink looks at it; most calls are never inspected field by field.
    """

    def __getattr__(self, name: str) -> Any:
        # only reached for attributes missing from the instance dict
        if name == "timestamp":
            value: Any = format_timestamp(self.__dict__["_created"])
        elif name == "event_id":
            value = format_event_id(self.__dict__["_number"])
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self.__dict__[name] = value
        return value


def call_fields(
    tool_id: str | None, tool_name: str | None, tool_type: str | None, context: ToolContext
) -> dict[str, Any]:
    """The fields every event of one call shares: the tool and the context ids, read once per call.

    For a call made without a context (`NO_CONTEXT`) the ids are left out rather than stored as None
    (they read as None from the event class all the same): a smaller dict for each of its events.
    """
    if context is NO_CONTEXT:
        return {"tool_id": tool_id, "tool_name": tool_name, "tool_type": tool_type}
    return {
        "tool_id": tool_id,
        "tool_name": tool_name,
        "tool_type": tool_type,
        "agent_id": context.agent_id,
        "workflow_id": context.workflow_id,
        "run_id": context.run_id,
        "node_id": context.node_id,
        "tool_call_id": context.tool_call_id,
        "trace_id": context.trace_id,
    }


def new_event(values: dict[str, Any]) -> ToolEvent:
    """The event whose field values are `values` (taken over, not copied; `type` and `metadata` required).

    Not yet redacted: the bus does that. Fields missing from `values` read as None.
    """
    if not _FAST:
        return ToolEvent(**values)
    values["_number"] = next(_ID_COUNTER)
    values["_created"] = _time()
    event = _new(CallEvent)
    event.__dict__ = values
    return event


def make_event(
    event_type: str,
    tool_id: str | None,
    tool_name: str | None,
    tool_type: str | None,
    context: ToolContext,
    *,
    input: Any = None,
    output: Any = None,
    error: str | None = None,
    error_type: str | None = None,
    duration_ms: float | None = None,
    attempts: int | None = None,
    metadata: dict[str, Any] | None = None,
) -> ToolEvent:
    """A call event carrying the context ids (not yet redacted: the bus does that)."""
    values = call_fields(tool_id, tool_name, tool_type, context)
    values["type"] = event_type
    values["metadata"] = metadata if metadata is not None else {}
    # fields left at None are not stored: the dataclass's class attributes already say None
    for name, value in (
        ("input", input),
        ("output", output),
        ("error", error),
        ("error_type", error_type),
        ("duration_ms", duration_ms),
        ("attempts", attempts),
    ):
        if value is not None:
            values[name] = value
    return new_event(values)


_secret_keys: dict[Any, bool] = {}
_safe_keys: set[str] = set()  # keys seen and found not secret (bounded)
_SCALARS = (str, int, float, bool, type(None))
_SCALAR_TYPES = frozenset(_SCALARS)


def _is_secret(key: Any) -> bool:
    found = _secret_keys.get(key)
    if found is None:
        # ask events.redact itself, so the rule stays the one defined there; cache the answer
        found = isinstance(key, str) and redact({key: 1})[key] == REDACTED
        if len(_secret_keys) < 4096:
            _secret_keys[key] = found
            if not found and isinstance(key, str):
                _safe_keys.add(key)
    return found


def redacted(value: Any, _depth: int = 0) -> Any:
    """`events.redact` with the per-key test cached; a flat dict without secrets is returned as is."""
    if isinstance(value, _SCALARS) or _depth > 20:
        return value
    if isinstance(value, dict):
        # the common case, decided in C: every key known harmless and every value a scalar
        if value.keys() <= _safe_keys and set(map(type, value.values())) <= _SCALAR_TYPES:
            return value
        return {k: (REDACTED if _is_secret(k) else redacted(v, _depth + 1)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(v, _depth + 1) for v in value]
    return value


class CallEventBus(EventBus):
    """The executor's event bus: `EventBus.emit`'s contract (redact, deliver in order, isolate failing
    sinks) with the secret-key test cached, since it runs twice per call."""

    def emit(self, event: ToolEvent, flat_keys: frozenset[str] = frozenset()) -> None:
        """Redact, then deliver to every sink in order.

        `flat_keys`: input keys the caller knows to be harmless and to hold scalars (the input passed a
        schema typing them so); an input made of such keys only needs no redaction and no check.
        """
        sinks = tuple(self.sinks)
        if not sinks:
            return
        value = event.input
        # most inputs are flat objects of known-harmless keys: decided in C, without a copy
        if value is not None and not (
            type(value) is dict
            and (
                flat_keys.issuperset(value)
                or (value.keys() <= _safe_keys and set(map(type, value.values())) <= _SCALAR_TYPES)
            )
        ):
            event.input = redacted(value)
        value = event.output
        if value is not None and not isinstance(value, _SCALARS):
            event.output = redacted(value)
        if event.metadata:
            event.metadata = redacted(event.metadata)
        for sink in sinks:
            try:
                sink(event)
            except Exception:  # boundary: a broken sink must never break a tool call
                logger.exception("event sink %r raised on %s", sink, event.type)


# -- results ----------------------------------------------------------------------------------------


def make_result(
    tool_id: str,
    name: str,
    success: bool,
    output: Any,
    error: str | None,
    error_type: str | None,
    duration_ms: float,
    attempts: int,
    metadata: dict[str, Any],
) -> ToolResult:
    """A `ToolResult` from values the executor produced itself (already the right types).

    Skips pydantic's validation, which would cost as much as the rest of a fast call; what pydantic's own
    `model_construct` does, without its per-field Python loop.
    """
    values = {
        "tool_id": tool_id,
        "name": name,
        "success": success,
        "output": output,
        "error": error,
        "error_type": error_type,
        "duration_ms": duration_ms,
        "attempts": attempts,
        "metadata": metadata,
    }
    if not _FAST_RESULT:
        return ToolResult(**values)
    result = _new(ToolResult)  # what _construct does, without the extra call
    _set(result, "__dict__", values)
    _set_fields_set(result, _ALL_FIELDS)
    _set_extra(result, None)
    _set_private(result, None)
    return result


_set = object.__setattr__
# the slots' own setters: what object.__setattr__ ends up calling, without looking the name up
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_ALL_FIELDS = set(ToolResult.model_fields)


def _construct(values: dict[str, Any]) -> ToolResult:
    # the construction `make_result` inlines (a call less on every result); checked once below
    result = _new(ToolResult)
    _set(result, "__dict__", values)
    _set(result, "__pydantic_fields_set__", _ALL_FIELDS)  # every field is set; adding one is a no-op
    _set(result, "__pydantic_extra__", None)
    _set(result, "__pydantic_private__", None)
    return result


def _fast_result_is_safe() -> bool:
    # Only when ToolResult still has exactly these plain fields and a constructed result equals a validated one.
    sample: dict[str, Any] = {"tool_id": "t", "name": "t", "success": True, "output": [1], "error": None}
    sample |= {"error_type": None}
    sample |= {"duration_ms": 1.0, "attempts": 1, "metadata": {}}
    if set(ToolResult.model_fields) != set(sample):
        return False
    try:
        fast = _construct(dict(sample))
        made = make_result(**sample)  # the inlined copy, with the slot setters
        return fast == ToolResult(**sample) == made and fast.model_dump() == sample == made.model_dump()
    except Exception:  # boundary: any surprise from a newer pydantic means the slow, validated path
        return False


_FAST_RESULT = True  # tried once by _fast_result_is_safe, then kept only when it is
_FAST_RESULT = _fast_result_is_safe()


# -- outputs ------------------------------------------------------------------------------------


def to_json_value(value: Any, _depth: int = 0) -> Any:
    """A tool's output as a JSON value.

    Pydantic models and dataclasses become dicts; tuples and sets lists; enums their value; dates and
    times ISO 8601 text; bytes UTF-8 text; `Decimal` a float; anything else its `str()`.
    """
    if isinstance(value, _SCALARS):
        return value.value if isinstance(value, enum.Enum) else value
    if _depth > 100:
        return str(value)
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): to_json_value(v, _depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_json_value(v, _depth + 1) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return to_json_value(dump(mode="json"), _depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json_value(dataclasses.asdict(value), _depth + 1)
    if isinstance(value, enum.Enum):
        return to_json_value(value.value, _depth + 1)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, decimal.Decimal):
        return float(value)
    return str(value)
