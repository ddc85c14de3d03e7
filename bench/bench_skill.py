"""A skill of 10 independent steps against the same 10 calls issued concurrently by hand.

Both run the trivial `add(a, b)` tool through one `ToolExecutor` (default isolation: a worker thread per
call), with validation and events. The skill adds its own call (two events, its pipeline), reference
resolution and step scheduling; the goal is at most 1.2x the hand-written `asyncio.gather`. Wall medians in
microseconds, and the process's CPU time per run (on a loaded machine the wall figures of ten worker threads
swing widely). The second pair runs the same tool `isolation: "inline"` (no thread hop): what is left is the
machinery alone, the skill's share of it at its largest.

Run: .venv/bin/python bench/bench_skill.py
"""

from __future__ import annotations

import asyncio
import os
import time
import warnings
from typing import Any

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
warnings.simplefilter("ignore")

from _common import ameasure, report  # noqa: E402

from echo_tools import ToolExecutor, ToolRegistry  # noqa: E402

N = int(os.environ.get("BENCH_N", "2000"))
STEPS = 10
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


def build(isolation: str = "thread") -> ToolExecutor:
    registry = ToolRegistry(allowed_modules=["_common"])
    registry.register(
        {
            "tool_id": "add",
            "name": "add",
            "input_schema": SCHEMA,
            "execution_config": {"module": "_common", "function": "add", "isolation": isolation},
        }
    )
    registry.register(
        {
            "tool_id": "ten_adds",
            "name": "ten adds",
            "tool_type": "skill",
            "input_schema": SCHEMA,
            "execution_config": {
                "steps": [
                    {"id": f"s{i}", "tool": "add", "input": {"a": "$.input.a", "b": i}} for i in range(STEPS)
                ],
                "output": [f"$.steps.s{i}.output" for i in range(STEPS)],
            },
        }
    )
    return ToolExecutor(registry, event_sinks=[lambda event: None])


async def compare(isolation: str) -> list[list[Any]]:
    """The rows of one pair: by hand, then the skill (wall median, ratio, CPU per run, ratio)."""
    executor = build(isolation)
    expected = [1 + i for i in range(STEPS)]

    async def by_hand() -> None:
        results = await asyncio.gather(*(executor.invoke("add", {"a": 1, "b": i}) for i in range(STEPS)))
        assert [r.output for r in results] == expected

    async def skill() -> None:
        result = await executor.invoke("ten_adds", {"a": 1, "b": 0})
        assert result.output == expected, result.error

    async def cpu_us(fn: Any, n: int) -> float:
        """CPU time of the whole process (loop, workers, event thread) per run: what the work costs, which
        a loaded machine's scheduling does not change the way it changes wall time."""
        started = time.process_time()
        for _ in range(n):
            await fn()
        return (time.process_time() - started) / n * 1e6

    # alternate the two, so a change in machine load falls on both alike
    hand, composite, hand_cpu, composite_cpu = [], [], [], []
    for _ in range(5):
        hand.append(await ameasure(by_hand, N // 5))
        composite.append(await ameasure(skill, N // 5))
        hand_cpu.append(await cpu_us(by_hand, N // 10))
        composite_cpu.append(await cpu_us(skill, N // 10))
    await executor.aclose()
    hand_us, skill_us = sorted(hand)[2], sorted(composite)[2]
    hand_cpu_us, skill_cpu_us = sorted(hand_cpu)[2], sorted(composite_cpu)[2]
    return [
        [f"10 calls, asyncio.gather by hand ({isolation})", hand_us, 1.0, hand_cpu_us, 1.0],
        [
            f"skill of 10 independent steps ({isolation})",
            skill_us,
            skill_us / hand_us,
            skill_cpu_us,
            skill_cpu_us / hand_cpu_us,
        ],
    ]


async def main() -> None:
    rows = [*await compare("thread"), *await compare("inline")]
    report(
        rows,
        title=f"skill vs hand-written concurrency ({N} runs each, goal <= 1.2x with threads)",
        headers=["what", "wall median us", "ratio", "cpu us/run", "cpu ratio"],
    )


if __name__ == "__main__":
    asyncio.run(main())
