"""Timing helpers shared by the benchmarks: medians of many single calls, and a plain table printer.

Stable API (others import it): `measure(fn, n) -> median_us`, `await ameasure(coro_fn, n) -> median_us`,
`report(rows, title=None)`. Also the trivial `add(a, b)` tool every executor benchmark uses.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

_perf = time.perf_counter


def add(a: float, b: float) -> float:
    """The benchmark tool: as cheap as a tool can be, so only the machinery around it is measured."""
    return a + b


def measure(fn: Callable[[], Any], n: int = 20_000, *, warmup: int | None = None) -> float:
    """Median wall time of one `fn()` call in microseconds, over `n` timed calls after a warm-up."""
    for _ in range(warmup if warmup is not None else max(10, n // 10)):
        fn()
    samples = []
    gc_was_enabled = gc.isenabled()
    gc.collect()
    try:
        for _ in range(n):
            start = _perf()
            fn()
            samples.append(_perf() - start)
    finally:
        if gc_was_enabled:
            gc.enable()
    return statistics.median(samples) * 1e6


async def ameasure(
    coro_fn: Callable[[], Awaitable[Any]], n: int = 20_000, *, warmup: int | None = None
) -> float:
    """Median wall time of one `await coro_fn()` in microseconds, on the running loop."""
    for _ in range(warmup if warmup is not None else max(10, n // 10)):
        await coro_fn()
    samples = []
    gc.collect()
    for _ in range(n):
        start = _perf()
        await coro_fn()
        samples.append(_perf() - start)
    return statistics.median(samples) * 1e6


async def throughput(coro_fn: Callable[[], Awaitable[Any]], total: int, concurrency: int) -> float:
    """Completed calls per second with `concurrency` workers sharing `total` calls."""
    import asyncio

    remaining = total

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            await coro_fn()

    start = _perf()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (_perf() - start)


def report(
    rows: Sequence[Sequence[Any]], title: str | None = None, headers: Sequence[str] | None = None
) -> None:
    """Print rows as an aligned text table (floats with 2 decimals)."""
    cells = [[f"{c:,.2f}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    if headers:
        cells.insert(0, list(headers))
    widths = [max(len(row[i]) for row in cells if i < len(row)) for i in range(max(len(r) for r in cells))]
    if title:
        print(title)
    for index, row in enumerate(cells):
        print("  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
        if headers and index == 0:
            print("  ".join("-" * w for w in widths))
