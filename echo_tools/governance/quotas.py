"""Quotas: at most `limit` calls in any `per_s` seconds, per tool, principal, end user or run.

A `Quota` (`echo_tools.models.Quota`) sits on a `ToolDef` (`quotas: [...]`, counting that tool's calls)
or on the executor (`ToolExecutor(quotas=[...])`, counting every call). Its `scope` says what is counted
apart: `tool` (all callers together), `principal` (each principal), `user` (each `ToolContext.user_id`;
calls without one share one count) or `run` (each `run_id`).

The window slides: a call is allowed when fewer than `limit` calls were counted in the last `per_s`
seconds, so no `per_s` window ever holds more than `limit` calls. Over quota, the call fails with
`error_type="quota"` and `metadata["retry_after_s"]`: the seconds until the oldest counted call leaves the
window. Counting happens when the call is about to run (after hooks and approval), and a refused call is
not counted: with several quotas, those that counted it before one refused it give it back. `MemoryQuotaCounter` counts in this process; `PgQuotaCounter` (`echo_tools.governance.pg`) in
PostgreSQL, so replicas on one database share every count.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable, Hashable
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol

from echo_tools.call import Call
from echo_tools.errors import QuotaExceededError
from echo_tools.models import Quota, QuotaScope

if TYPE_CHECKING:
    pass

__all__ = [
    "MemoryQuotaCounter",
    "QuotaCount",
    "QuotaCounter",
    "QuotaGiveBack",
    "Window",
    "counting",
    "quota_error",
    "scope_reader",
    "scope_value",
]


class QuotaCounter(Protocol):
    """Where quota counts live. `take(key, limit, per_s)` counts one call and returns 0.0, or counts
    nothing and returns the seconds until one more call fits."""

    blocking: bool  # True when `take` waits for a database (the executor then calls it off the event loop)

    def take(self, key: str, limit: int, per_s: float) -> float: ...

    def give_back(self, key: str, limit: int, per_s: float) -> None:
        """Uncount the newest call counted under `key` (a call another quota refused after this one
        counted it)."""


class Window:
    """The sliding windows of one quota over one tool (or every tool): per scope value, the times of the
    last `limit` calls counted (a sliding log). The one home of the window's arithmetic."""

    __slots__ = ("_clock", "_lock", "_logs", "limit", "per_s")

    def __init__(self, limit: int, per_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.per_s = limit, per_s
        self._logs: defaultdict[Hashable, deque[float]] = defaultdict(partial(deque, maxlen=limit))
        self._lock = threading.Lock()
        self._clock = clock

    def take(self, value: Hashable) -> float:
        """Count one call under the scope value `value` now (0.0), or count nothing and answer the seconds
        until one more call fits: until the oldest of the last `limit` calls leaves the window. One clock
        read, one uncontended lock, O(1)."""
        self._lock.acquire()  # not `with`: this runs on every governed call, and `with` costs twice as much
        try:
            now = (
                self._clock()
            )  # read under the lock: every log stays in time order, so hits[0] is the oldest
            hits = self._logs[value or None]  # no value and an empty one (a user id of "") count together
            # fewer than `limit` calls ever, or the oldest of the last `limit` has left the window: at
            # most `limit - 1` are in it, so this one fits (a full log drops its oldest as it appends)
            if len(hits) < self.limit or hits[0] <= now - self.per_s:
                hits.append(now)
                return 0.0
            return max(hits[0] + self.per_s - now, 0.001)
        finally:
            self._lock.release()

    def give_back(self, value: Hashable) -> None:
        """Uncount the newest call counted under `value`: a call another quota refused after this window
        counted it. (When another call of `value` was counted in between, its time is the one dropped
        and the given-back call's, microseconds older, stays in its place.)"""
        with self._lock:
            hits = self._logs[value or None]
            if hits:
                hits.pop()


class MemoryQuotaCounter:
    """Counts in this process: a `Window` per key, limit and window length."""

    blocking = False

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._windows: dict[tuple[str, int, float], Window] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def take(self, key: str, limit: int, per_s: float) -> float:
        return self.window(key, limit, per_s).take(None)

    def give_back(self, key: str, limit: int, per_s: float) -> None:
        self.window(key, limit, per_s).give_back(None)

    def window(self, key: str, limit: int, per_s: float) -> Window:
        """The windows counted under `key` (one per scope value), made on first use."""
        with self._lock:
            window = self._windows.get((key, limit, per_s))
            if window is None:
                window = self._windows[key, limit, per_s] = Window(limit, per_s, self._clock)
            return window


QuotaCount = Callable[[Any], float]  # count one call under a scope value: 0.0, or the seconds until one fits
QuotaGiveBack = Callable[[Any], None]  # uncount the newest call counted under a scope value


def counting(counter: QuotaCounter, tool_id: str | None, quota: Quota) -> tuple[QuotaCount, QuotaGiveBack]:
    """How a call of `tool_id` (None: any tool, an executor quota) is counted against `quota` in `counter`,
    given its scope value (`scope_reader`), and given back when another quota refuses it; the key's fixed
    parts are built once, here, not per call."""
    prefix, suffix = _key_parts(quota, tool_id)
    if isinstance(counter, MemoryQuotaCounter):  # the in-process counter: the windows themselves
        window = counter.window(prefix + suffix, quota.limit, quota.per_s)
        return window.take, window.give_back
    limit, per_s = quota.limit, quota.per_s

    def take(value: Any) -> float:
        return counter.take(f"{prefix}{value or ''}{suffix}", limit, per_s)

    def give_back(value: Any) -> None:
        counter.give_back(f"{prefix}{value or ''}{suffix}", limit, per_s)

    return take, give_back


def _everyone(call: Call) -> None:
    return None  # scope `tool`: every call is counted together


def _principal(call: Call) -> str:
    principal = getattr(call.context, "principal", None)  # set by the gate (`echo_tools.gate`) when present
    name = getattr(principal, "name", principal)
    return str(name) if name else "operator"


# what a call is counted under, per scope: a user id or run id (None: calls without one share a count),
# a principal name; read by C (`attrgetter`) where it can be, as it is read on every counted call
_READERS: dict[QuotaScope, Callable[[Call], Hashable]] = {
    QuotaScope.TOOL: _everyone,
    QuotaScope.USER: attrgetter("context.user_id"),
    QuotaScope.RUN: attrgetter("context.run_id"),
    QuotaScope.PRINCIPAL: _principal,
}


def scope_reader(scope: QuotaScope) -> Callable[[Call], Hashable]:
    """How a call's scope value is read for `scope` (a principal name, a user id, a run id; None: none)."""
    return _READERS[scope]


def scope_value(scope: QuotaScope, call: Call) -> str:
    """What a call is counted under for `scope`, as text ("" for none)."""
    return str(_READERS[scope](call) or "")


def _key_parts(quota: Quota, tool_id: str | None) -> tuple[str, str]:
    return f"{tool_id or '*'}|{quota.scope.value}:", f"|{quota.limit}/{quota.per_s:g}"


def quota_error(call: Call, quota: Quota, retry_after_s: float, where: str) -> QuotaExceededError:
    """The error of a call over `quota` (`where`: "tool" or "executor"), naming the quota and its scope."""
    value = scope_value(quota.scope, call)
    whose = f" for {quota.scope.value} {value!r}" if quota.scope is not QuotaScope.TOOL else ""
    retry = round(retry_after_s, 3)
    return QuotaExceededError(
        f"Tool {call.tool_id!r}: over the {where} quota of {quota.limit} calls per {quota.per_s:g} s{whose}; "
        f"try again in {retry:g} s",
        tool_id=call.tool_id,
        field="quotas",
        retry_after_s=retry,
        quota={"limit": quota.limit, "per_s": quota.per_s, "scope": quota.scope.value},
    )
