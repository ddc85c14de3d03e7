"""The time a node has: an agent's `constraints.timeout_seconds`, and a Failsafe's `timeout` around the node
it guards. Tool calls made inside get at most what is left (the executor stops them), and an agent's crew is
waited for no longer: `run_bounded` gives up on it with `NodeTimeoutError` naming the agent.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "workflow_bridge_node_deadline", default=None
)


class NodeTimeoutError(TimeoutError):
    """A node's work did not finish within its bound; the message names the node and the bound."""


@contextmanager
def deadline_in(seconds: float | None) -> Iterator[None]:
    """While the block runs, the node's deadline is at most `seconds` from now (None: unchanged)."""
    if seconds is None:
        yield
        return
    current = _DEADLINE.get()
    proposed = time.monotonic() + seconds
    token = _DEADLINE.set(proposed if current is None else min(current, proposed))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def remaining_s() -> float | None:
    """Seconds left before the node's deadline (None: no deadline)."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


def bounded_timeout_ms(timeout_ms: int | None) -> int | None:
    """A tool call's timeout within the node's deadline (at least 1 ms, so a late call fails at once)."""
    left = remaining_s()
    if left is None:
        return timeout_ms
    left_ms = max(1, int(left * 1000))
    return left_ms if timeout_ms is None else min(timeout_ms, left_ms)


def run_bounded(fn: Callable[[], T], seconds: float | None, what: str) -> T:
    """`fn()` on a thread of its own (the caller's context variables with it), waited for at most
    `seconds` (and the node's deadline). A thread cannot be killed: on timeout its result is dropped and
    `NodeTimeoutError` says so; its tool calls past the deadline fail, as every call's own timeout holds.

    Raises:
        NodeTimeoutError: `fn` did not finish in time (the message names `what` and the bound).
    """
    left = remaining_s()
    wait = seconds if left is None else (left if seconds is None else min(seconds, left))
    if wait is None:
        return fn()
    context = contextvars.copy_context()
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def target() -> None:
        try:
            outcome["value"] = context.run(fn)
        except BaseException as exc:  # boundary: handed to the waiting node, whatever it is
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name=f"echo-tools {what}"[:60], daemon=True).start()
    if not done.wait(max(0.0, wait)):
        bound = (
            f"{seconds:g} s" if seconds is not None and (left is None or seconds <= left) else "its deadline"
        )
        raise NodeTimeoutError(
            f"{what} did not finish within {bound}: it was stopped (its work still running in the background "
            "is abandoned, and its result is not used)"
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]  # type: ignore[no-any-return]
