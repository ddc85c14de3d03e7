"""Local tools for the compiler tests: echo, a score reporter, a failing tool, and tools that meet at a
barrier so two parallel branches can prove they overlap (each waits until the other has started)."""

from __future__ import annotations

import threading
from typing import Any

# Parallel-overlap tools: `meet_a` and `meet_b` each record that they started, then wait (bounded) for
# the other one to start. If the branches ran one after another, the first would time out.
STARTED = {"a": threading.Event(), "b": threading.Event()}
WAIT_SECONDS = 20.0


def reset() -> None:
    for event in STARTED.values():
        event.clear()


def _meet(me: str, other: str, topic: str) -> dict[str, Any]:
    STARTED[me].set()
    met = STARTED[other].wait(WAIT_SECONDS)
    if not met:
        raise RuntimeError(f"branch {me!r} waited {WAIT_SECONDS}s and branch {other!r} never started")
    return {"branch": me, "topic": topic, "met": other}


def meet_a(topic: str) -> dict[str, Any]:
    """Branch A: starts, then waits for branch B to have started."""
    return _meet("a", "b", topic)


def meet_b(topic: str) -> dict[str, Any]:
    """Branch B: starts, then waits for branch A to have started."""
    return _meet("b", "a", topic)


def echo(text: str, prefix: str = "echo") -> dict[str, Any]:
    """Echo the text with a prefix."""
    return {"echo": f"{prefix}: {text}"}


def score(subject: str) -> dict[str, Any]:
    """Report a risk score (the number of characters in the subject times three)."""
    return {"subject": subject, "risk_score": len(subject) * 3}


def broken(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"broken tool: {reason}")


def http_like(url: str, method: str = "GET", headers: dict | None = None, json: Any = None) -> dict[str, Any]:
    """Stands in for tool_http_request in API-node tests: reports what it was asked to send."""
    return {"status": 200, "url": url, "method": method, "sent": json}
