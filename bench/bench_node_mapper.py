"""Benchmark: NodeMapper on a generated 50-node canvas (the compile-time share that is ours).

Prints the median time of `map_canvas` and `to_canvas`, and, measured in the same run for scale, the
median time of parsing the same payload from JSON text and of building and compiling a stock LangGraph
`StateGraph` with as many nodes (no CrewAI, no tools): mapping should be a small fraction of the latter.
Run: `.venv/bin/python bench/bench_node_mapper.py [N] [REPEATS]`.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _canvas_gen import make_canvas  # noqa: E402

from echo_tools.registry import ToolRegistry  # noqa: E402
from workflow_bridge.node_mapper import NodeMapper  # noqa: E402


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: imports and caches are not what we measure
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def stock_langgraph(n: int) -> Callable[[], Any]:
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict, total=False):
        crew_result: str

    def step(state: State) -> State:
        return {"crew_result": ""}

    def build() -> Any:
        graph = StateGraph(State)
        for i in range(n):
            graph.add_node(f"n{i}", step)
        graph.add_edge(START, "n0")
        for i in range(n - 1):
            graph.add_edge(f"n{i}", f"n{i + 1}")
        graph.add_edge(f"n{n - 1}", END)
        return graph.compile()

    return build


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    registry = ToolRegistry(discovery_dirs=[HERE.parent / "AgentTools"])
    registry.discover_local_tools()
    tools = tuple(t for t in ("tool_calculator", "tool_code_reviewer") if registry.get(t)) or ()
    mapper = NodeMapper(registry)
    payload = make_canvas(n, tools=tools)
    text = json.dumps(payload)
    mapped = mapper.map_canvas(payload)
    if not mapped.ok:
        print("mapping failed:", *mapped.errors, sep="\n  ")
        return 1

    rows = [
        ("map_canvas", median_ms(lambda: mapper.map_canvas(payload), repeats)),
        ("to_canvas", median_ms(lambda: mapper.to_canvas(mapped.workflow, mapped.agents), repeats)),
        ("json.loads of the payload (scale)", median_ms(lambda: json.loads(text), repeats)),
        ("stock LangGraph build+compile (scale)", median_ms(stock_langgraph(n), max(5, repeats // 5))),
    ]
    print(
        f"NodeMapper, {n}-node canvas ({mapped.workflow['execution_model']}, tools {list(tools)}), "
        f"median of {repeats}"
    )
    for name, ms in rows:
        print(f"  {name:<40} {ms:9.3f} ms")
    base = rows[3][1]
    print(f"  map_canvas / stock LangGraph compile      {rows[0][1] / base:9.3f} x")
    print(f"  map_canvas / json.loads                   {rows[0][1] / rows[2][1]:9.1f} x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
