"""Instructions per inline call, this checkout against another commit: the cost of the pipeline itself,
measured so that a busy machine cannot move it.

`valgrind --tool=callgrind` counts the instructions a process executes; the same code, inputs and
environment give the same count whatever else the machine does. Each side runs `invoke_sync` of a
trivial inline `add` tool (input and output validation, two events to a MemoryEventLog) N1 and N2 times
after the same warm-up; the difference of the two totals over N2 - N1 is the instructions of one call,
start-up and imports cancelled out. The other side is the commit `--against` (default: the parent of the
first commit of the call-object rework, 42d7c4c), checked out in a temporary worktree and imported from
there; both use this checkout's virtualenv.

Run: .venv/bin/python bench/bench_call_instructions.py [--against REV] [--calls 500,2500]
Needs valgrind (Debian: apt-get install valgrind).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CALLS = """
import sys, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, {bench!r})
from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry
SCHEMA = {{"type": "object", "properties": {{"a": {{"type": "number"}}, "b": {{"type": "number"}}}},
          "required": ["a", "b"]}}
registry = ToolRegistry(allowed_modules=["_common"])
registry.register({{"name": "add inline", "side_effect": "pure", "input_schema": SCHEMA,
                   "output_schema": {{"type": "number"}},
                   "execution_config": {{"module": "_common", "function": "add", "isolation": "inline"}}}})
executor = ToolExecutor(registry, [MemoryEventLog()])
args = {{"a": 1, "b": 2}}
for _ in range(200):
    assert executor.invoke_sync("add inline", args).output == 3
for _ in range(int(sys.argv[1])):
    executor.invoke_sync("add inline", args)
"""


def instructions(tree: Path | None, calls: int, script: Path) -> int:
    """The instructions callgrind counted for one run of `script` doing `calls` calls."""
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)  # ahead of the editable install's finder
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.out", sys.executable, str(script), str(calls)],
            capture_output=True, text=True, env=env, check=True,
        )  # fmt: skip
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no total:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def per_call(tree: Path | None, low: int, high: int, script: Path) -> float:
    return (instructions(tree, high, script) - instructions(tree, low, script)) / (high - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default="42d7c4c", help="the commit to compare with (default 42d7c4c)")
    parser.add_argument("--calls", default="500,2500", help="the two call counts differenced")
    options = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (Debian: apt-get install valgrind)")
    low, high = (int(n) for n in options.calls.split(","))
    with tempfile.TemporaryDirectory() as scratch:
        other = Path(scratch) / "other"
        subprocess.run(["git", "worktree", "add", "--detach", str(other), options.against], cwd=ROOT,
                       check=True, capture_output=True)  # fmt: skip
        try:
            script = Path(scratch) / "calls.py"
            script.write_text(CALLS.format(bench=str(ROOT / "bench")), encoding="utf-8")
            theirs = per_call(other, low, high, script)
            ours = per_call(None, low, high, script)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, check=False)
    print(f"inline invoke_sync, instructions per call ({high - low} calls differenced, callgrind):")
    print(f"  {options.against:>12}  {theirs:12,.0f}")
    print(f"  {'this checkout':>12}  {ours:12,.0f}")
    print(f"  ratio         {ours / theirs:12.3f}x")


if __name__ == "__main__":
    main()
