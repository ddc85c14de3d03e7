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
    """How many `track` calls were running at once (reset between tests)."""

    active = 0
    peak = 0

    @classmethod
    def reset(cls) -> None:
        cls.active = cls.peak = 0


async def track(label: str) -> str:
    """An async tool that records how many calls overlap; it yields to the loop a few times mid-call."""
    import asyncio

    Concurrency.active += 1
    Concurrency.peak = max(Concurrency.peak, Concurrency.active)
    try:
        for _ in range(5):
            await asyncio.sleep(0)  # a yield to the loop, not a wait: lets the other calls start
    finally:
        Concurrency.active -= 1
    return label
