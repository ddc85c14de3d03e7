"""Replay vs run: the code-pipeline sample (`make demo`'s workflow) run for real, then replayed from its
recorded events (every tool call answered from the history, no tool runs), in one process.

    run      `run_workflow` of sample_workflows/code_pipeline.canvas.json (offline rehearsal model, the
             AgentTools running for real, events kept in runs.sqlite)
    replay   `replay_run` of that run (`ToolExecutor(..., replay=history.recording(run_id))`)

Each is timed end to end (compile, run, history writes) and reported as medians; the ratio is replay time
over run time (below 1: the replay is faster). Run: `.venv/bin/python bench/bench_replay.py [ROUNDS]`.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

with (
    warnings.catch_warnings()
):  # crewai's first import warns (see tests/workflow_bridge/_compiler_support.py)
    warnings.simplefilter("ignore")
    import crewai  # noqa: F401

from echo_tools import ToolExecutor, ToolRegistry  # noqa: E402
from echo_tools.history import RunHistory  # noqa: E402
from workflow_bridge.runner import replay_run, run_workflow  # noqa: E402

SAMPLE = ROOT / "sample_workflows" / "code_pipeline.canvas.json"


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values) * 1000:8.1f} ms   min {min(values) * 1000:8.1f} ms   (n={len(values)})"


def main(rounds: int = 5) -> None:
    with tempfile.TemporaryDirectory() as folder:
        registry = ToolRegistry(storage_dir=folder)
        registry.discover_local_tools([ROOT / "AgentTools"])
        history = RunHistory(folder)
        executor = ToolExecutor(registry, event_sinks=[history])
        run_times, replay_times, calls = [], [], 0
        for i in range(rounds + 1):  # the first round warms imports and caches, and is not counted
            start = time.perf_counter()
            final = run_workflow(
                str(SAMPLE), registry=registry, executor=executor, llm="rehearsal", run_id=f"run_{i}",
                history=history,
            )  # fmt: skip
            executor.events.flush()
            history.flush()
            ran = time.perf_counter() - start
            start = time.perf_counter()
            again = replay_run(f"run_{i}", storage=history, new_run_id=f"replay_{i}", registry=registry)
            history.flush()
            replayed = time.perf_counter() - start
            if again.get("crew_result") != final.get("crew_result"):
                raise SystemExit(f"round {i}: the replay's crew_result differs from the run's")
            calls = sum(
                1 for e in history.events(run_id=f"run_{i}", limit=10_000) if e.type == "tool.invoked"
            )
            if i:
                run_times.append(ran)
                replay_times.append(replayed)
        executor.close()
        history.close()
    run_median, replay_median = statistics.median(run_times), statistics.median(replay_times)
    print(f"code-pipeline sample, {calls} tool calls a run, rehearsal model:")
    print(f"  run     {_ms(run_times)}")
    print(f"  replay  {_ms(replay_times)}")
    print(
        f"  ratio replay / run {replay_median / run_median:5.2f}  (run / replay {run_median / replay_median:5.2f}x)"
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if sys.argv[1:] else 5)
