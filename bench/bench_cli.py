"""Wall time of `echo-tools list` as a fresh process (target: under 0.5 s), against bare Python startup
and against importing the agent frameworks, measured in the same run.

    .venv/bin/python bench/bench_cli.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _common import report  # noqa: E402

TARGET_S = 0.5


def wall(cmd: list[str], env: dict[str, str], runs: int) -> float:
    """Median wall time in seconds of `runs` runs of `cmd` (after one warm-up run)."""
    samples = []
    for index in range(runs + 1):
        started = time.perf_counter()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, cwd=HERE.parent)
        if index:  # the first run warms the OS file cache and writes the storage
            samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "ECHO_TOOLS_HOME": home}
        python = wall([sys.executable, "-c", "pass"], env, args.runs)
        listing = wall([sys.executable, "-m", "echo_tools.cli", "list"], env, args.runs)
        helping = wall([sys.executable, "-m", "echo_tools.cli", "--help"], env, args.runs)
        frameworks = wall(
            [sys.executable, "-c", "import crewai, langgraph.graph"], env, max(1, args.runs // 3)
        )
    report(
        [
            ("python -c pass", python * 1000, 1.0),
            ("echo-tools --help", helping * 1000, helping / python),
            ("echo-tools list", listing * 1000, listing / python),
            ("import crewai, langgraph", frameworks * 1000, frameworks / python),
        ],
        title=f"CLI start-up, median of {args.runs} runs (target for list: < {TARGET_S * 1000:.0f} ms)",
        headers=("command", "ms", "x python"),
    )
    verdict = "meets" if listing < TARGET_S else "MISSES"
    print(f"echo-tools list {verdict} the {TARGET_S} s target ({listing:.3f} s)")
    return 0 if listing < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
