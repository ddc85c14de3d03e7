"""Small local tools with known behaviour: arithmetic, a None detector, a failing tool, nested input."""

from __future__ import annotations

from typing import Any


def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def lookup(query: str, **options: Any) -> dict[str, Any]:
    """Echo the query and options; refuses any option that arrived as None (an unset optional field)."""
    leaked = sorted(k for k, v in options.items() if v is None)
    if leaked:
        raise AssertionError(f"optional fields arrived as None: {leaked}")
    return {"query": query, "options": options}


def configure(settings: dict[str, Any], label: str = "default") -> dict[str, Any]:
    """Echo a nested settings object; refuses None anywhere inside it."""

    def leaks(value: Any, path: str) -> list[str]:
        if value is None:
            return [path]
        if isinstance(value, dict):
            return [p for k, v in value.items() for p in leaks(v, f"{path}.{k}")]
        if isinstance(value, list):
            return [p for i, v in enumerate(value) for p in leaks(v, f"{path}[{i}]")]
        return []

    found = leaks(settings, "settings")
    if found:
        raise AssertionError(f"None arrived at {found}")
    return {"settings": settings, "label": label}


def explode(reason: str) -> str:
    """Always fails, with the reason given."""
    raise RuntimeError(f"exploded: {reason}")


async def shout(text: str) -> str:
    """An async tool: upper-cases the text."""
    return text.upper()


class Concurrency:
    """How many `track` calls run at once; each call waits until `target` calls are running together."""

    active = 0
    peak = 0
    target = 1
    _changed: Any = None

    @classmethod
    def reset(cls, target: int) -> None:
        cls.active = cls.peak = 0
        cls.target = target
        cls._changed = None


async def track(label: str) -> str:
    """An async tool that records overlapping calls; it returns once `Concurrency.target` calls overlap.

    The wait is bounded (5 s): calls that can never overlap enough fail instead of hanging.
    """
    import asyncio

    if Concurrency._changed is None:
        Concurrency._changed = asyncio.Condition()
    changed = Concurrency._changed
    async with changed:
        Concurrency.active += 1
        Concurrency.peak = max(Concurrency.peak, Concurrency.active)
        changed.notify_all()
        try:
            await asyncio.wait_for(changed.wait_for(lambda: Concurrency.peak >= Concurrency.target), 5)
        finally:
            Concurrency.active -= 1
    return label
