"""A `code` tool call (`main(a, b)` run in the code sandbox) against `tool_code_executor` running the same
program, both through the executor. Both start one sandboxed process per call, so the ratio shows what the
code tool adds around it: writing the arguments as JSON, importing the code, reading the result back.

Run: .venv/bin/python bench/bench_code_tool.py
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from _common import measure, report

from echo_tools import ToolExecutor, ToolRegistry

N = int(os.environ.get("BENCH_N", "40"))
ROOT = Path(__file__).resolve().parents[1]
CODE = "def main(a: float, b: float) -> float:\n    return a + b\n"
PROGRAM = "import json\nprint(json.dumps(2.0 + 3.0))\n"


def main() -> None:
    with tempfile.TemporaryDirectory() as storage:
        registry = ToolRegistry(storage_dir=storage, discovery_dirs=[ROOT / "AgentTools"])
        registry.discover_local_tools()
        registry.register({"tool_id": "adder", "name": "Adder", "tool_type": "code",
                           "execution_config": {"code": CODE}})  # fmt: skip
        executor = ToolExecutor(registry)

        def executor_tool() -> None:
            result = executor.invoke_sync("tool_code_executor", {"code": PROGRAM})
            assert result.success and result.output["stdout"] == "5.0\n", result.error

        def code_tool() -> None:
            result = executor.invoke_sync("adder", {"a": 2, "b": 3})
            assert result.success and result.output["result"] == 5.0, result.error

        # alternate the two, so a change in machine load falls on both alike
        plain, wrapped = [], []
        for _ in range(5):
            plain.append(measure(executor_tool, max(1, N // 5), warmup=2))
            wrapped.append(measure(code_tool, max(1, N // 5), warmup=2))
        plain_us, code_us = sorted(plain)[2], sorted(wrapped)[2]
        executor.close()
    report(
        [
            ["tool_code_executor running a + b", plain_us, 1.0],
            ["a `code` tool whose main(a, b) returns a + b", code_us, code_us / plain_us],
        ],
        title=f"code tool overhead (median of 5 rounds of {max(1, N // 5)} calls)",
        headers=["", "median us", "ratio"],
    )


if __name__ == "__main__":
    main()
