"""The `code` backend: runs a code tool's `main(**arguments)` in the code sandbox, one process per call.

The sandbox is `echo_tools.sandbox`, the one the shipped `tool_code_executor` uses too (own namespaces, no
network, rlimits, a memory cgroup, a tmpfs working folder). The tool's source is written as `tool_code.py`
beside a small runner: the arguments arrive as JSON on stdin, and `main`'s return value comes back as
JSON on stdout after a marker line known only to this call, so what the code prints stays its output.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import BackendHost, BackendOutput, ToolBackend
from echo_tools.code_tools import ENTRY_POINT, check_code_config, merge_config
from echo_tools.errors import ToolExecutionError, ToolTimeoutError
from echo_tools.sandbox import SandboxLimits, run_python

if TYPE_CHECKING:
    from collections.abc import Sequence

    from echo_tools.egress import EgressPolicy
    from echo_tools.models import ToolContext, ToolDef

_MODULE = "tool_code"
# asyncio is imported only for an `async def main`: its import is a large part of a small call's time
_RUNNER = f"""\
import json, sys
marker = sys.argv[1]
arguments = json.loads(sys.stdin.read() or "{{}}")
import {_MODULE}
value = {_MODULE}.{ENTRY_POINT}(**arguments)
if hasattr(value, "__await__"):
    import asyncio
    value = asyncio.run(value)
try:
    text = json.dumps(value)
except (TypeError, ValueError):
    text = json.dumps(repr(value))
sys.stdout.flush()
sys.stdout.write("\\n" + marker + text + "\\n")
"""
_TAIL_LINES = 12


class CodeBackend(ToolBackend):
    """Runs `code` tools in the sandbox; a failing `main` is a failed call carrying its traceback's tail."""

    def __init__(self, executor: BackendHost) -> None:
        self.executor = executor

    @classmethod
    def check_config(
        cls, tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
    ) -> None:
        check_code_config(tool)

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        config = merge_config(tool.execution_config)
        marker = f"@@echo-tools-result-{secrets.token_hex(16)}@@"
        run = await run_python(
            _RUNNER,
            stdin=json.dumps(args),
            limits=SandboxLimits(timeout_s=config["timeout_s"], memory_mb=config["memory_mb"]),
            files={f"{_MODULE}.py": config["code"]},
            argv=[marker],
        )
        if run.timed_out:
            raise ToolTimeoutError(
                f"Tool {tool.tool_id!r}: main did not return within execution_config.timeout_s "
                f"({config['timeout_s']:g} s)",
                tool_id=tool.tool_id,
            )
        printed, found, tail = run.stdout.rpartition("\n" + marker)
        if not found or run.exit_code != 0:
            why = run.limit_hit or _last_lines(run.stderr) or f"exit code {run.exit_code}"
            raise ToolExecutionError(f"Tool {tool.tool_id!r}: main failed: {why}", tool_id=tool.tool_id)
        metadata: dict[str, Any] = {"duration_ms": round(run.duration_ms, 2)}
        if run.stderr.strip():
            metadata["stderr"] = _last_lines(run.stderr)
        return BackendOutput({"result": json.loads(tail), "stdout": printed}, metadata)


def _last_lines(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return "\n".join(lines[-_TAIL_LINES:])
