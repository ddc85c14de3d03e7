"""Benchmark: compiling a 50-node canvas, and the executor's share of a sample run's wall time.

1. Compile: the median time of `WorkflowCompiler.compile` on the mapped `make_canvas(50)` (Start, 48 tool
   agents with every tenth node a Conditional, End), of `compile_source` (NodeMapper + compile), and, for
   scale in the same run, of building and compiling a stock LangGraph `StateGraph` with as many nodes.
2. Executor share: runs `sample_workflows/code_pipeline.canvas.json` offline (rehearsal model, real tools)
   and divides the summed `duration_ms` of its completed tool events by the run's wall time.
3. Loops and maps: `WorkflowCompiler.compile` of `make_canvas(200)` and of the same canvas with every node
   whose id ends in 5 turned into a Loop (`for`, `maxIterations` 3) or a Map (alternately), each running
   the Agent after it: the cycles, `Send` routes and config checks they add, as a ratio.
Run: `.venv/bin/python bench/bench_compiler.py [N] [REPEATS] [RUNS]` (defaults 50 10 3);
`.venv/bin/python bench/bench_compiler.py --flow [N] [REPEATS]` runs part 3 alone (defaults 200 15).
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


def timings_ms(
    fn: Callable[[], Any], repeats: int, clock: Callable[[], float] = time.perf_counter
) -> tuple[float, float]:
    """(median, best) of `repeats` timed calls after a warm-up; the best is steadier on a busy machine.
    `clock=time.process_time` counts this process's CPU time, which other work on the machine disturbs less."""
    fn()  # warm-up: imports and caches are not what we measure
    samples = []
    for _ in range(repeats):
        started = clock()
        fn()
        samples.append((clock() - started) * 1000)
    return statistics.median(samples), min(samples)


def stock_same_shape(workflow: dict[str, Any], agents: dict[str, Any]) -> Callable[[], Any]:
    """A stock StateGraph with our state schema, one trivial node per agent and every connection as a plain
    edge: what LangGraph itself costs for a graph of this size and schema."""
    from langgraph.graph import END, START, StateGraph

    from workflow_bridge.state import build_state_schema

    ids = list(workflow["agents"])
    edges = [(c["from"], c["to"]) for c in workflow["connections"]]

    def step(state: dict[str, Any]) -> dict[str, Any]:
        return {}

    def build() -> Any:
        graph = StateGraph(build_state_schema(workflow, agents))
        for node in ids:
            graph.add_node(node, step)
        for source, target in edges:
            graph.add_edge(source, target)
        for node in ids:
            if not any(t == node for _, t in edges):
                graph.add_edge(START, node)
            if not any(s == node for s, _ in edges):
                graph.add_edge(node, END)
        return graph.compile()

    return build


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
    rows = {
        "WorkflowCompiler.compile": lambda: WorkflowCompiler(reg, executor).compile(
            mapped.workflow, mapped.agents
        ),
        "compile_source (map + compile)": lambda: compile_source(canvas, reg, executor),
        f"stock LangGraph, {n}-node chain": stock_langgraph(n),
        "stock LangGraph, same state + edges": stock_same_shape(mapped.workflow, mapped.agents),
    }
    results = {name: timings_ms(fn, repeats) for name, fn in rows.items()}
    print(
        f"compile, {n}-node canvas ({mapped.workflow['execution_model']}), {repeats} repeats: median / best"
    )
    for name, (median, best) in results.items():
        print(f"  {name:<34} {median:8.2f} / {best:8.2f} ms")
    ours = results["WorkflowCompiler.compile"][1]
    print(
        f"  ratio compile / stock chain (best)       {ours / results[f'stock LangGraph, {n}-node chain'][1]:8.2f} x"
    )
    print(
        f"  ratio compile / stock same shape (best)  {ours / results['stock LangGraph, same state + edges'][1]:8.2f} x"
    )


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


def flow_canvas(n: int) -> dict[str, Any]:
    """`make_canvas(n)` with every node whose id ends in 5 a Loop or a Map (alternately) over the Agent
    after it: the same nodes and connections, 10% of them Loops and Maps."""
    canvas = make_canvas(n)
    flow = [node for node in canvas["canvas_nodes"] if node["id"] % 10 == 5 and node["id"] < n - 1]
    for index, node in enumerate(flow):
        if index % 2 == 0:
            node.update(type="Loop", label="Loop", config={"loopType": "for", "maxIterations": 3})
        else:
            node.update(type="Map", label="Map", config={"operation": "", "maxConcurrency": 4})
    return canvas


def bench_flow_compile(n: int, repeats: int) -> None:
    reg = registry()
    executor = ToolExecutor(reg)
    plain = NodeMapper(reg).map_canvas(make_canvas(n))
    flow = NodeMapper(reg).map_canvas(flow_canvas(n))
    for mapped in (plain, flow):
        if not mapped.ok:
            raise SystemExit(f"the generated canvas does not map: {mapped.errors}")
    kinds = [a["metadata"]["node_type"] for a in flow.agents.values()]
    rows = {
        "without loops and maps": lambda: WorkflowCompiler(reg, executor).compile(
            plain.workflow, plain.agents
        ),
        f"with {kinds.count('Loop')} loops, {kinds.count('Map')} maps": lambda: WorkflowCompiler(
            reg, executor
        ).compile(flow.workflow, flow.agents),
    }
    results = {name: timings_ms(fn, repeats) for name, fn in rows.items()}
    cpu = {name: timings_ms(fn, repeats, clock=time.process_time) for name, fn in rows.items()}
    print(f"compile, {n}-node canvas, {repeats} repeats: median / best wall, median CPU (this process)")
    for name, (median, best) in results.items():
        print(f"  {name:<34} {median:8.2f} / {best:8.2f} ms   {cpu[name][0]:8.2f} ms CPU")
    (plain_ms, _), (flow_ms, _) = results.values()
    (plain_cpu, _), (flow_cpu, _) = cpu.values()
    print(
        f"  ratio with / without (median)      {flow_ms / plain_ms:8.2f} x   {flow_cpu / plain_cpu:8.2f} x CPU"
    )


def main() -> None:
    if sys.argv[1:2] == ["--flow"]:
        bench_flow_compile(
            int(sys.argv[2]) if len(sys.argv) > 2 else 200, int(sys.argv[3]) if len(sys.argv) > 3 else 15
        )
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    bench_compile(n, repeats)
    bench_executor_share(runs)


if __name__ == "__main__":
    main()
