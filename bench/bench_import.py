"""`import echo_tools` in a fresh interpreter (target: under 250 ms), with crewai and langgraph for reference.

Each figure is the wall time of `python -c "import X"` minus that of `python -c "pass"` measured in the
same run, so interpreter start-up is not counted. Run: .venv/bin/python bench/bench_import.py
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import report  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parent.parent
RUNS = 10
TARGET_MS = 250.0
ENV = {
    **os.environ,
    "CREWAI_DISABLE_TELEMETRY": "true",
    "OTEL_SDK_DISABLED": "true",
    "PYTHONPATH": str(REPO_ROOT),
}


def run_once(code: str) -> tuple[float, float]:
    """Wall and CPU (user + system) milliseconds of one fresh interpreter running `code`.

    CPU time is reported too because the machine may be shared: it does not grow when others are busy.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=ENV, check=True, capture_output=True)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def median_ms(code: str, runs: int) -> tuple[float, float]:
    samples = [run_once(code) for _ in range(runs)]
    return statistics.median(w for w, _ in samples), statistics.median(c for _, c in samples)


def minus(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return a[0] - b[0], a[1] - b[1]


def main() -> None:
    run_once("import echo_tools")  # warm the file cache and the bytecode cache
    startup = median_ms("pass", RUNS)
    ours = minus(median_ms("import echo_tools", RUNS), startup)
    registry = minus(median_ms("from echo_tools import ToolRegistry; ToolRegistry()", RUNS), startup)
    crewai = minus(run_once("import crewai"), startup)
    langgraph = minus(run_once("import langgraph.graph"), startup)
    report(
        [
            [f"import echo_tools (median of {RUNS})", *ours],
            ["import echo_tools + ToolRegistry()", *registry],
            ["import crewai (once)", *crewai],
            ["import langgraph.graph (once)", *langgraph],
            ["interpreter start-up, subtracted above", *startup],
        ],
        title="Import time in a fresh process",
        headers=["", "wall ms", "cpu ms"],
    )
    verdict = "meets" if min(ours) < TARGET_MS else "MISSES"
    print(
        f"\necho_tools {verdict} the {TARGET_MS:.0f} ms target (wall {ours[0]:.0f} ms, cpu {ours[1]:.0f} ms); "
        f"by CPU, crewai takes {crewai[1] / ours[1]:.0f}x as long, langgraph {langgraph[1] / ours[1]:.0f}x"
    )


if __name__ == "__main__":
    main()
