"""Benchmark: compiling a 50-node canvas, and the executor's share of a sample run's wall time.

1. Compile: the median time of `WorkflowCompiler.compile` on the mapped `make_canvas(50)` (Start, 48 tool
   agents with every tenth node a Conditional, End), of `compile_source` (NodeMapper + compile), and, for
   scale in the same run, of building and compiling a stock LangGraph `StateGraph` with as many nodes.
2. Executor share: runs `sample_workflows/code_pipeline.canvas.json` offline (rehearsal model, real tools)
   and divides the summed `duration_ms` of its completed tool events by the run's wall time.
Run: `.venv/bin/python bench/bench_compiler.py [N] [REPEATS] [RUNS]`.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
for _key, _value in {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
}.items():
    os.environ.setdefault(_key, _value)
os.environ.pop("ECHO_LLM", None)  # the executor-share figure is for the offline rehearsal run

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import crewai  # noqa: F401

from _canvas_gen import make_canvas  # noqa: E402
from bench_node_mapper import stock_langgraph  # noqa: E402

from echo_tools.events import MemoryEventLog  # noqa: E402
from echo_tools.executor import ToolExecutor  # noqa: E402
from echo_tools.registry import ToolRegistry  # noqa: E402
from workflow_bridge.compiler import WorkflowCompiler  # noqa: E402
from workflow_bridge.node_mapper import NodeMapper  # noqa: E402
from workflow_bridge.runner import compile_source, run_workflow  # noqa: E402

SAMPLE = HERE.parent / "sample_workflows" / "code_pipeline.canvas.json"


def median_ms(fn: Callable[[], Any], repeats: int) -> float:
    fn()  # warm-up: imports and caches are not what we measure
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def registry() -> ToolRegistry:
    reg = ToolRegistry(discovery_dirs=[HERE.parent / "AgentTools"])
    reg.discover_local_tools()
    return reg


def bench_compile(n: int, repeats: int) -> None:
    reg = registry()
    executor = ToolExecutor(reg)
    canvas = make_canvas(n)
    mapped = NodeMapper(reg).map_canvas(canvas)
    if not mapped.ok:
        raise SystemExit(f"the generated canvas does not map: {mapped.errors}")
    compile_ms = median_ms(
        lambda: WorkflowCompiler(reg, executor).compile(mapped.workflow, mapped.agents), repeats
    )
    source_ms = median_ms(lambda: compile_source(canvas, reg, executor), repeats)
    stock_ms = median_ms(stock_langgraph(n), repeats)
    print(f"compile, {n}-node canvas ({mapped.workflow['execution_model']}), median of {repeats}:")
    print(f"  WorkflowCompiler.compile          {compile_ms:8.2f} ms")
    print(f"  compile_source (map + compile)    {source_ms:8.2f} ms")
    print(f"  stock LangGraph, {n} nodes, chain  {stock_ms:8.2f} ms")
    print(f"  ratio compile / stock             {compile_ms / stock_ms:8.2f} x")


def bench_executor_share(runs: int) -> None:
    reg = registry()
    shares, walls, tools = [], [], []
    for i in range(runs + 1):
        log = MemoryEventLog()
        executor = ToolExecutor(reg, event_sinks=[log])
        started = time.perf_counter()
        run_workflow(SAMPLE, registry=reg, executor=executor, run_id=f"run_bench_{i}")
        wall_ms = (time.perf_counter() - started) * 1000
        executor.close()
        tool_ms = sum(e.duration_ms or 0.0 for e in log.events if e.type in ("tool.completed", "tool.failed"))
        if i == 0:
            continue  # warm-up: first imports of the tools and the sandbox
        shares.append(tool_ms / wall_ms)
        walls.append(wall_ms)
        tools.append(tool_ms)
    print(f"sample run ({SAMPLE.name}, rehearsal model, real tools), median of {runs}:")
    print(f"  wall time of run_workflow         {statistics.median(walls):8.2f} ms")
    print(f"  sum of tool durations             {statistics.median(tools):8.2f} ms")
    print(f"  executor share of wall time       {statistics.median(shares) * 100:8.1f} %")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    bench_compile(n, repeats)
    bench_executor_share(runs)


if __name__ == "__main__":
    main()
