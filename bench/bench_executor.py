"""Executor overhead for a trivial sync `add(a, b)` tool, against the stock frameworks, in one process.

Rows: a direct call; CrewAI `BaseTool.run`; LangChain `StructuredTool.invoke`; LangGraph `ToolNode` (one
call); our `invoke_sync` and awaited `invoke`, with input and output validation and two events delivered
to a MemoryEventLog, for the tool run inline (`isolation: "inline"`, opted in) and in a worker thread
(the default). Medians in microseconds; ratios against CrewAI's `BaseTool.run`.

Run: .venv/bin/python bench/bench_executor.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import warnings

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


if __name__ == "__main__":
    main()
