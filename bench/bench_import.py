"""`import echo_tools` in a fresh interpreter (target: under 250 ms), with crewai and langgraph for reference.

Each figure is the wall time of `python -c "import X"` minus that of `python -c "pass"` measured in the
same run, so interpreter start-up is not counted. Run: .venv/bin/python bench/bench_import.py
"""

from __future__ import annotations

import os
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


def run_once(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=ENV, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000


def median_ms(code: str, runs: int) -> float:
    return statistics.median(run_once(code) for _ in range(runs))


def main() -> None:
    run_once("import echo_tools")  # warm the file cache and the bytecode cache
    startup = median_ms("pass", RUNS)
    ours = median_ms("import echo_tools", RUNS) - startup
    registry = median_ms("from echo_tools import ToolRegistry; ToolRegistry()", RUNS) - startup
    crewai = run_once("import crewai") - startup
    langgraph = run_once("import langgraph.graph") - startup
    report(
        [
            [f"import echo_tools (median of {RUNS})", ours, "ms"],
            ["import echo_tools + ToolRegistry()", registry, "ms"],
            ["import crewai (once)", crewai, "ms"],
            ["import langgraph.graph (once)", langgraph, "ms"],
            ["interpreter start-up, subtracted above", startup, "ms"],
        ],
        title="Import time in a fresh process",
    )
    verdict = "meets" if ours < TARGET_MS else "MISSES"
    print(
        f"\necho_tools {verdict} the {TARGET_MS:.0f} ms target; crewai takes {crewai / ours:.0f}x as long, "
        f"langgraph {langgraph / ours:.0f}x"
    )


if __name__ == "__main__":
    main()
