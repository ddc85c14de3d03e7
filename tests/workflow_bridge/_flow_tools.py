"""Local tools for the Loop / Map / Failsafe / Self-Review tests: one that records every call, and one that
measures how many of its calls are in flight at once (each call waits, bounded, for the others of its wave
to start, so a wave that really runs in parallel shows its full width)."""

from __future__ import annotations

import threading
from typing import Any

CALLS: list[str] = []
_LOCK = threading.Condition()
IN_FLIGHT = {"now": 0, "max": 0, "wave": 4}
OVERLAP_WAIT_S = 15.0  # sized for a loaded machine; a full wave never waits it out


def reset(wave: int = 4) -> None:
    with _LOCK:
        CALLS.clear()
        IN_FLIGHT.update(now=0, max=0, wave=wave)


def visit(customer: str) -> dict[str, Any]:
    """Visit one customer (records the call)."""
    with _LOCK:
        CALLS.append(customer)
    return {"visited": customer}


def measure(item: int) -> dict[str, Any]:
    """Square a number, counting the calls in flight."""
    with _LOCK:
        IN_FLIGHT["now"] += 1
        IN_FLIGHT["max"] = max(IN_FLIGHT["max"], IN_FLIGHT["now"])
        CALLS.append(str(item))
        _LOCK.notify_all()
        # bounded: a wave narrower than IN_FLIGHT["wave"] (the last one) just waits out the bound
        _LOCK.wait_for(lambda: IN_FLIGHT["now"] >= IN_FLIGHT["wave"], timeout=OVERLAP_WAIT_S)
    try:
        return {"item": item, "square": item * item}
    finally:
        with _LOCK:
            IN_FLIGHT["now"] -= 1


RELEASE = threading.Event()


def stall(reason: str) -> dict[str, Any]:
    """Wait (bounded) until the test releases it."""
    RELEASE.wait(30)
    return {"stalled": reason}
