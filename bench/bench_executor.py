"""Executor overhead for a trivial sync `add(a, b)` tool, against the stock frameworks, in one process.

Rows: a direct call; CrewAI `BaseTool.run`; LangChain `StructuredTool.invoke`; LangGraph `ToolNode` (one
call); our `invoke_sync` and awaited `invoke`, with input and output validation and two events delivered
to a MemoryEventLog, for the tool run inline (`isolation: "inline"`, opted in) and in a worker thread
(the default). Medians in microseconds.

Then the three comparisons the executor is held to, each against the same CrewAI tool run the stock way
(same run, same machine): inline `invoke_sync` vs `BaseTool.run` (<= 1.5x); an awaited thread tool vs
`asyncio.to_thread(crew_tool.run, ...)` (<= 1.2x); a sync thread call vs
`ThreadPoolExecutor.submit(crew_tool.run, ...).result()` (<= 1.3x). Last, memory per call: the process's
resident size after 100,000 more calls, which must stay flat.

Run: .venv/bin/python bench/bench_executor.py
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import os
import statistics
import sys
import time
import warnings
from collections.abc import Awaitable, Callable

for key, value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
}.items():
    os.environ.setdefault(key, value)
warnings.simplefilter("ignore")

from _common import add, ameasure, measure, report  # noqa: E402

from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry  # noqa: E402

N = int(os.environ.get("BENCH_N", "20000"))
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
ARGS = {"a": 1, "b": 2}
_perf = time.perf_counter


def crewai_tool():  # noqa: ANN201
    from crewai.tools import BaseTool
    from pydantic import BaseModel

    class AddArgs(BaseModel):
        a: float
        b: float

    class AddTool(BaseTool):
        name: str = "add"
        description: str = "Add two numbers."
        args_schema: type[BaseModel] = AddArgs

        def _run(self, a: float, b: float) -> float:
            return add(a, b)

    return AddTool()


def langchain_tool():  # noqa: ANN201
    from langchain_core.tools import StructuredTool

    def add_numbers(a: float, b: float) -> float:
        """Add two numbers."""
        return add(a, b)

    return StructuredTool.from_function(add_numbers, name="add")


def tool_node_call(lc_tool):  # noqa: ANN001, ANN201
    from langchain_core.messages import AIMessage
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    # a ToolNode only runs inside a graph: the smallest one, START -> tools
    graph = (
        StateGraph(MessagesState).add_node("tools", ToolNode([lc_tool])).add_edge(START, "tools").compile()
    )
    state = {"messages": [AIMessage("", tool_calls=[{"name": "add", "args": ARGS, "id": "c1"}])]}
    assert graph.invoke(state)["messages"][-1].content in ("3", "3.0")
    return lambda: graph.invoke(state)


def executor() -> tuple[ToolExecutor, MemoryEventLog]:
    registry = ToolRegistry(allowed_modules=["_common"])
    for name, isolation in (("add inline", "inline"), ("add thread", "thread")):
        registry.register(
            {
                "name": name,
                "side_effect": "pure",
                "input_schema": SCHEMA,
                "output_schema": {"type": "number"},
                "execution_config": {"module": "_common", "function": "add", "isolation": isolation},
            }
        )
    log = MemoryEventLog()
    return ToolExecutor(registry, [log]), log


def resident_bytes() -> int:
    """The process's resident set size now (Linux), after a full collection."""
    gc.collect()
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def memory_per_call(ex: ToolExecutor, log: MemoryEventLog, calls: int) -> list[tuple[str, float]]:
    """Resident size growth over `calls` more calls, after a warm-up of the same, in bytes per call."""
    rows = []
    for name in ("add inline", "add thread"):
        for _ in range(calls // 10):
            ex.invoke_sync(name, ARGS)
        log.events.clear()
        before = resident_bytes()
        for n in range(calls):
            ex.invoke_sync(name, ARGS)
            if n % 1000 == 0:
                log.events.clear()
        log.events.clear()
        rows.append(
            (f"invoke_sync, {name.split()[1]} tool, bytes per call", (resident_bytes() - before) / calls)
        )
    return rows


def paired(ours: Callable[[], object], stock: Callable[[], object], n: int) -> tuple[float, float]:
    """Medians (us) of `ours()` and `stock()` timed in turn, call after call: a busy machine slows both
    alike, so their ratio holds where two separate runs would drift apart."""
    for _ in range(max(10, n // 10)):
        ours()
        stock()
    mine: list[float] = []
    theirs: list[float] = []
    gc.collect()
    for _ in range(n):
        start = _perf()
        ours()
        middle = _perf()
        stock()
        mine.append(middle - start)
        theirs.append(_perf() - middle)
    return statistics.median(mine) * 1e6, statistics.median(theirs) * 1e6


async def apaired(
    ours: Callable[[], Awaitable[object]], stock: Callable[[], Awaitable[object]], n: int
) -> tuple[float, float]:
    """`paired` for awaited calls, on the running loop."""
    for _ in range(max(10, n // 10)):
        await ours()
        await stock()
    mine: list[float] = []
    theirs: list[float] = []
    gc.collect()
    for _ in range(n):
        start = _perf()
        await ours()
        middle = _perf()
        await stock()
        mine.append(middle - start)
        theirs.append(_perf() - middle)
    return statistics.median(mine) * 1e6, statistics.median(theirs) * 1e6


def main() -> None:
    ex, log = executor()
    assert ex.invoke_sync("add inline", ARGS).output == 3 and ex.invoke_sync("add thread", ARGS).output == 3
    crew, lc = crewai_tool(), langchain_tool()
    assert crew.run(**ARGS) == 3 and lc.invoke(ARGS) == 3
    stock_threads = concurrent.futures.ThreadPoolExecutor(4)

    def clear() -> None:
        if len(log.events) > 10_000:
            log.events.clear()

    def sync_inline() -> None:
        ex.invoke_sync("add inline", ARGS)
        clear()

    def sync_thread() -> None:
        ex.invoke_sync("add thread", ARGS)
        clear()

    inline_us, crew_us = paired(sync_inline, lambda: crew.run(**ARGS), N)
    sync_thread_us, pool_us = paired(
        sync_thread, lambda: stock_threads.submit(crew.run, **ARGS).result(), N // 4
    )
    rows: list[tuple[str, float]] = [
        ("direct add(1, 2)", measure(lambda: add(1, 2), N)),
        ("CrewAI BaseTool.run", crew_us),
        ("LangChain StructuredTool.invoke", measure(lambda: lc.invoke(ARGS), N // 4)),
        ("LangGraph ToolNode in a graph (1 call)", measure(tool_node_call(lc), N // 40)),
        ("echo invoke_sync, inline tool", inline_us),
        ("ThreadPoolExecutor.submit(crew.run).result()", pool_us),
        ("echo invoke_sync, thread tool", sync_thread_us),
    ]
    log.events.clear()

    async def awaited() -> list[tuple[str, float]]:
        async def inline() -> None:
            await ex.invoke("add inline", ARGS)
            clear()

        async def thread() -> None:
            await ex.invoke("add thread", ARGS)
            clear()

        thread_us, to_thread_us = await apaired(thread, lambda: asyncio.to_thread(crew.run, **ARGS), N // 4)
        return [
            ("echo await invoke, inline tool", await ameasure(inline, N)),
            ("asyncio.to_thread(crew.run)", to_thread_us),
            ("echo await invoke, thread tool", thread_us),
        ]

    rows += asyncio.run(awaited())
    report(
        rows,
        f"executor overhead, trivial add tool (median of up to {N} calls, python {sys.version.split()[0]}; "
        "each comparison timed call by call in turn)",
        ["path", "median us"],
    )
    us = dict(rows)
    print()
    report(
        [
            (
                "inline invoke_sync / CrewAI BaseTool.run",
                us["echo invoke_sync, inline tool"] / us["CrewAI BaseTool.run"],
                1.5,
            ),
            (
                "awaited thread tool / asyncio.to_thread(crew.run)",
                us["echo await invoke, thread tool"] / us["asyncio.to_thread(crew.run)"],
                1.2,
            ),
            (
                "sync thread call / ThreadPoolExecutor.submit(crew.run).result()",
                us["echo invoke_sync, thread tool"] / us["ThreadPoolExecutor.submit(crew.run).result()"],
                1.3,
            ),
        ],
        "ratios against the stock frameworks (same run)",
        ["comparison", "ratio", "target"],
    )
    print()
    calls = int(os.environ.get("BENCH_MEMORY_CALLS", "100000"))
    report(
        memory_per_call(ex, log, calls),
        f"memory: resident size growth over {calls:,} calls",
        ["path", "bytes"],
    )


if __name__ == "__main__":
    main()
