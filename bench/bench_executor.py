"""Executor overhead for a trivial sync `add(a, b)` tool, against the stock frameworks, in one process.

Rows: a direct call; CrewAI `BaseTool.run`; LangChain `StructuredTool.invoke`; LangGraph `ToolNode` (one
call); our `invoke_sync` and awaited `invoke`, with input and output validation and two events delivered
to a MemoryEventLog, for the tool run inline (`isolation: "inline"`, opted in) and in a worker thread
(the default). Medians in microseconds; ratios against CrewAI's `BaseTool.run`.

Then the floors of a hand-off between two threads on this machine, which a thread tool pays on top of
the pipeline: a lock ping-pong (each side wakes the other while holding the GIL), the worker pool's own
pattern (a pipe byte written with the GIL let go, a lock released back), and an event loop woken by a
thread through `call_soon_threadsafe` and through a pipe the loop reads (`add_reader`, what the pool uses).

Run: .venv/bin/python bench/bench_executor.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import warnings
from collections.abc import Callable

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


def _serve(wait: Callable[[], object], answer: Callable[[], object]) -> None:
    """Start a daemon thread that answers each `wait()` with `answer()`, forever."""

    def loop() -> None:
        while True:
            wait()
            answer()

    threading.Thread(target=loop, daemon=True).start()


def floors() -> list[tuple[str, float]]:
    """Round trips between two threads with nothing else to do, in microseconds."""
    go, done = threading.Lock(), threading.Lock()
    go.acquire()
    done.acquire()
    _serve(go.acquire, done.release)

    def ping_pong() -> None:
        go.release()
        done.acquire()

    read_end, write_end = os.pipe()
    back = threading.Lock()
    back.acquire()
    _serve(lambda: os.read(read_end, 1), back.release)

    def pipe_then_lock() -> None:
        os.write(write_end, b"\0")
        back.acquire()

    async def loop_wakes() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        waiter: list[asyncio.Future[None]] = []
        to_thread, from_loop = os.pipe()
        to_loop, from_thread = os.pipe()
        os.set_blocking(to_loop, False)
        by_reader = [False]

        def answer() -> None:
            if by_reader[0]:
                os.write(from_thread, b"\0")
            else:
                loop.call_soon_threadsafe(waiter[0].set_result, None)

        _serve(lambda: os.read(to_thread, 1), answer)

        def read_answer() -> None:
            os.read(to_loop, 64)
            waiter[0].set_result(None)

        loop.add_reader(to_loop, read_answer)

        async def round_trip() -> None:
            waiter[:] = [loop.create_future()]
            os.write(from_loop, b"\0")
            await waiter[0]

        threadsafe = await ameasure(round_trip, N // 4)
        by_reader[0] = True
        reader = await ameasure(round_trip, N // 4)
        loop.remove_reader(to_loop)
        return threadsafe, reader

    threadsafe, reader = asyncio.run(loop_wakes())
    return [
        ("two threads, lock ping-pong", measure(ping_pong, N // 4)),
        ("two threads, pipe there, lock back (the pool)", measure(pipe_then_lock, N // 4)),
        ("loop <-> thread, call_soon_threadsafe back", threadsafe),
        ("loop <-> thread, pipe back read by the loop (the pool)", reader),
    ]


def main() -> None:
    ex, log = executor()
    assert ex.invoke_sync("add inline", ARGS).output == 3 and ex.invoke_sync("add thread", ARGS).output == 3
    crew, lc = crewai_tool(), langchain_tool()
    assert crew.run(**ARGS) == 3 and lc.invoke(ARGS) == 3

    def sync_inline() -> None:
        ex.invoke_sync("add inline", ARGS)
        if len(log.events) > 10_000:
            log.events.clear()

    rows: list[tuple[str, float]] = [
        ("direct add(1, 2)", measure(lambda: add(1, 2), N)),
        ("CrewAI BaseTool.run", measure(lambda: crew.run(**ARGS), N)),
        ("LangChain StructuredTool.invoke", measure(lambda: lc.invoke(ARGS), N // 4)),
        ("LangGraph ToolNode in a graph (1 call)", measure(tool_node_call(lc), N // 40)),
        ("echo invoke_sync, inline tool", measure(sync_inline, N)),
        ("echo invoke_sync, thread tool", measure(lambda: ex.invoke_sync("add thread", ARGS), N // 4)),
    ]
    log.events.clear()

    async def awaited() -> tuple[float, float]:
        async def inline() -> None:
            await ex.invoke("add inline", ARGS)
            if len(log.events) > 10_000:
                log.events.clear()

        async def thread() -> None:
            await ex.invoke("add thread", ARGS)
            if len(log.events) > 10_000:
                log.events.clear()

        return await ameasure(inline, N), await ameasure(thread, N // 4)

    inline_us, thread_us = asyncio.run(awaited())
    rows += [("echo await invoke, inline tool", inline_us), ("echo await invoke, thread tool", thread_us)]
    crew_us = rows[1][1]
    table = [(name, us, us / crew_us) for name, us in rows]
    report(
        table,
        f"executor overhead, trivial add tool (median of up to {N} calls, python {sys.version.split()[0]})",
        ["path", "median us", "x CrewAI run"],
    )
    print(
        "targets (x CrewAI run): inline invoke_sync <= 1.0, thread invoke_sync <= 2.0, "
        "thread await invoke <= 4.0"
    )
    print()
    report(floors(), "hand-off floors (nothing runs but the hand-off)", ["round trip", "median us"])


if __name__ == "__main__":
    main()
