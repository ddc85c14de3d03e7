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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from echo_tools.errors import QuotaExceededError
from echo_tools.models import Quota, QuotaScope

if TYPE_CHECKING:
    from echo_tools.governance.hooks import ToolCall

__all__ = ["MemoryQuotaCounter", "QuotaCounter", "quota_error", "scope_value"]


class QuotaCounter(Protocol):
    """Where quota counts live. `take(key, limit, per_s)` counts one call and returns 0.0, or counts
    nothing and returns the seconds until one more call fits."""

    blocking: bool  # True when `take` waits for a database (the executor then calls it off the event loop)

    def take(self, key: str, limit: int, per_s: float) -> float: ...


class MemoryQuotaCounter:
    """Counts in this process: per key, the times of the calls inside the window (a sliding log)."""

    blocking = False

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._hits: dict[str, deque[float]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def take(self, key: str, limit: int, per_s: float) -> float:
        now = self._clock()
        with self._lock:
            hits = self._hits.get(key)
            if hits is None:
                hits = self._hits[key] = deque()
            edge = now - per_s
            while hits and hits[0] <= edge:
                hits.popleft()
            if len(hits) < limit:
                hits.append(now)
                return 0.0
            return max(hits[0] + per_s - now, 0.001)


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


# what one tool's calls are counted against: (quota, key prefix, key suffix, where), worked out once
QuotaPlan = tuple[tuple[Quota, str, str, str], ...]


def quota_plan(tool_id: str, tool_quotas: Iterable[Quota], executor_quotas: Iterable[Quota]) -> QuotaPlan:
    """The quotas a call of `tool_id` is counted against: the tool's own, then the executor's."""
    plan = [(q, *_key_parts(q, tool_id), "tool") for q in tool_quotas]
    plan += [(q, *_key_parts(q, None), "executor") for q in executor_quotas]
    return tuple(plan)


def take_all(counter: QuotaCounter, call: ToolCall, plan: QuotaPlan) -> QuotaExceededError | None:
    """Count the call against every quota of `plan`, or the error of the first one it is over."""
    context = call.context
    for quota, prefix, suffix, where in plan:
        scope = quota.scope
        if scope is _TOOL:
            value = ""
        elif scope is _USER:
            value = context.user_id or ""
        else:
            value = scope_value(scope, call)
        wait = counter.take(prefix + value + suffix, quota.limit, quota.per_s)
        if wait > 0:
            return quota_error(call, quota, wait, where)
    return None
