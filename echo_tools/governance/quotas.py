"""Quotas: at most `limit` calls in any `per_s` seconds, per tool, principal, end user or run.

A `Quota` (`echo_tools.models.Quota`) sits on a `ToolDef` (`quotas: [...]`, counting that tool's calls)
or on the executor (`ToolExecutor(quotas=[...])`, counting every call). Its `scope` says what is counted
apart: `tool` (all callers together), `principal` (each principal), `user` (each `ToolContext.user_id`;
calls without one share one count) or `run` (each `run_id`).

The window slides: a call is allowed when fewer than `limit` calls were counted in the last `per_s`
seconds, so no `per_s` window ever holds more than `limit` calls. Over quota, the call fails with
`error_type="quota"` and `metadata["retry_after_s"]`: the seconds until the oldest counted call leaves the
window. Counting happens when the call is about to run (after hooks and approval), and a refused call is
not counted. `MemoryQuotaCounter` counts in this process; `PgQuotaCounter` (`echo_tools.governance.pg`) in
PostgreSQL, so replicas on one database share every count.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from echo_tools.errors import QuotaExceededError
from echo_tools.models import Quota, QuotaScope

if TYPE_CHECKING:
    from echo_tools.governance.hooks import ToolCall

__all__ = ["MemoryQuotaCounter", "QuotaCounter", "QuotaCount", "counting", "quota_error", "scope_value"]


class QuotaCounter(Protocol):
    """Where quota counts live. `take(key, limit, per_s)` counts one call and returns 0.0, or counts
    nothing and returns the seconds until one more call fits."""

    blocking: bool  # True when `take` waits for a database (the executor then calls it off the event loop)

    def take(self, key: str, limit: int, per_s: float) -> float: ...


class MemoryQuotaCounter:
    """Counts in this process: per key, the times of the calls inside the window (a sliding log).

    Keys are kept in two levels, `prefix + suffix` (the tool and quota) then the scope value, so the
    executor's per-call path (`counting`) looks a user id up in one small dict and builds no string."""

    blocking = False

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._groups: dict[str, dict[str, deque[float]]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def take(self, key: str, limit: int, per_s: float) -> float:
        with self._lock:
            group = self._groups.setdefault(key, {})
            return _count_in(group, "", self._clock(), limit, per_s)

    def counting(self, prefix: str, suffix: str, quota: Quota) -> QuotaCount:
        """How a call is counted against `quota` (key `prefix + scope value + suffix`), everything but the
        scope value bound once: the executor's per-call path (one clock read, one uncontended lock,
        O(1) amortised), with no string built."""
        with self._lock:
            group = self._groups.setdefault(prefix + "\0" + suffix, {})
        clock, lock = self._clock, self._lock
        limit, per_s, scope = quota.limit, quota.per_s, quota.scope
        by_user, by_tool = scope is QuotaScope.USER, scope is QuotaScope.TOOL

        def take(call: ToolCall) -> float:
            if by_user:
                value = call.context.user_id or ""
            else:
                value = "" if by_tool else scope_value(scope, call)
            now = clock()
            with lock:
                return _count_in(group, value, now, limit, per_s)

        return take


def _count_in(group: dict[str, deque[float]], value: str, now: float, limit: int, per_s: float) -> float:
    """Count one call at `now` in the window of `value` (0.0), or the seconds until one more fits."""
    hits = group.get(value)
    if hits is None:
        hits = group[value] = deque()
    edge = now - per_s
    while hits and hits[0] <= edge:
        hits.popleft()
    if len(hits) < limit:
        hits.append(now)
        return 0.0
    return max(hits[0] + per_s - now, 0.001)


QuotaCount = Callable[["ToolCall"], float]  # count one call: 0.0, or the seconds until one more fits


def counting(counter: QuotaCounter, tool_id: str | None, quota: Quota) -> QuotaCount:
    """How one call of `tool_id` (None: any tool, an executor quota) is counted against `quota` in
    `counter`; the key's fixed parts are built once, here, not per call."""
    prefix, suffix = _key_parts(quota, tool_id)
    if isinstance(counter, MemoryQuotaCounter):  # the in-process counter: everything bound once
        return counter.counting(prefix, suffix, quota)
    take, limit, per_s, scope = counter.take, quota.limit, quota.per_s, quota.scope
    return lambda call: take(prefix + scope_value(scope, call) + suffix, limit, per_s)


_TOOL, _USER, _RUN = QuotaScope.TOOL, QuotaScope.USER, QuotaScope.RUN  # enum members, read once


def scope_value(scope: QuotaScope, call: ToolCall) -> str:
    """What a call is counted under for `scope` (a principal name, a user id, a run id; "" for none)."""
    if scope is _TOOL:
        return ""
    context = call.context
    if scope is _USER:
        return context.user_id or ""
    if scope is _RUN:
        return context.run_id or ""
    principal = getattr(context, "principal", None)  # set by the gate (`echo_tools.gate`) when present
    name = getattr(principal, "name", principal)
    return str(name) if name else "operator"


def quota_key(quota: Quota, call: ToolCall, tool_id: str | None) -> str:
    """The counter key of `quota` for `call`: the tool (or `*` for an executor quota), scope and window."""
    prefix, suffix = _key_parts(quota, tool_id)
    return prefix + scope_value(quota.scope, call) + suffix


def _key_parts(quota: Quota, tool_id: str | None) -> tuple[str, str]:
    return f"{tool_id or '*'}|{quota.scope.value}:", f"|{quota.limit}/{quota.per_s:g}"


def quota_error(call: ToolCall, quota: Quota, retry_after_s: float, where: str) -> QuotaExceededError:
    """The error of a call over `quota` (`where`: "tool" or "executor"), naming the quota and its scope."""
    value = scope_value(quota.scope, call)
    whose = f" for {quota.scope.value} {value!r}" if quota.scope is not _TOOL else ""
    retry = round(retry_after_s, 3)
    return QuotaExceededError(
        f"Tool {call.tool_id!r}: over the {where} quota of {quota.limit} calls per {quota.per_s:g} s{whose}; "
        f"try again in {retry:g} s",
        tool_id=call.tool_id,
        field="quotas",
        retry_after_s=retry,
        quota={"limit": quota.limit, "per_s": quota.per_s, "scope": quota.scope.value},
    )
