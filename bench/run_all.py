"""Run every benchmark under bench/ in its own process and print their tables (`make bench`)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> int:
    scripts = sorted(p for p in HERE.glob("bench_*.py"))
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        started = time.perf_counter()
        proc = subprocess.run([sys.executable, str(script)], cwd=HERE.parent, check=False)
        print(
            f"--- {script.name}: exit {proc.returncode} in {time.perf_counter() - started:.1f} s", flush=True
        )
        if proc.returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
