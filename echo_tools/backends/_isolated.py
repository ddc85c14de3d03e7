"""Run one local tool call in a fresh subprocess that is killed when the call times out or is cancelled.

The parent never imports the tool's module: the child (`python -m echo_tools.backends._isolated`) imports
it, applies the same module allow-list, calls it and writes one JSON line back. Input and output cross
the boundary as JSON. The child runs in its own session so the kill also reaches anything it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import BackendOutput, module_allowed
from echo_tools.builtin_tools import builtin_claimed, claim_builtin_package
from echo_tools.errors import ToolConfigError, ToolExecutionError

if TYPE_CHECKING:
    from echo_tools.backends.python_targets import CallPlan
    from echo_tools.models import ToolDef

_STDERR_TAIL = 2000


def check_function(tool: ToolDef, allowed_modules: Sequence[str]) -> CallPlan:
    """The plan of a `process` tool: checked against the allow-list here, imported only in the child."""
    from echo_tools.backends.python_targets import CallPlan

    module = tool.execution_config.get("module")
    if not isinstance(module, str) or not module_allowed(module, allowed_modules):
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: module {module!r} is outside the allowed modules {list(allowed_modules)!r}",
            tool_id=tool.tool_id,
            field="execution_config.module",
        )
    return CallPlan(tool, _not_in_parent, is_async=False, style="kwargs", isolation="process")


def _not_in_parent(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a process-isolated tool is only called in its subprocess")


async def run_in_subprocess(
    tool: ToolDef, plan: CallPlan, args: dict[str, Any], allowed_modules: Sequence[str]
) -> BackendOutput:
    """Run the call in a child process; kill it (and its process group) if this coroutine is cancelled."""
    request = json.dumps(
        {
            "tool": tool.to_storage_dict(),
            "args": args,
            "allowed_modules": list(allowed_modules),
            "builtin": builtin_claimed(),  # the child binds `AgentTools` as this process did
        },
        default=str,
    ).encode()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "echo_tools.backends._isolated",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    try:
        stdout, stderr = await proc.communicate(request)
    except BaseException:
        # timeout (cancellation) or shutdown: the work must really stop
        _kill_group(proc.pid)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await asyncio.shield(proc.wait())
        raise
    lines = stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        reply = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        reply = None
    if not isinstance(reply, dict):
        tail = stderr.decode("utf-8", "replace")[-_STDERR_TAIL:]
        raise ToolExecutionError(
            f"Tool {tool.tool_id!r}: its subprocess exited with code {proc.returncode} without a result: {tail}",
            tool_id=tool.tool_id,
        )
    if not reply.get("ok"):
        raise ToolExecutionError(str(reply.get("error")), tool_id=tool.tool_id)
    return BackendOutput(reply.get("output"), {"pid": proc.pid})


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _child() -> None:
    """The subprocess side: read the request on stdin, call the tool, write one JSON line."""
    out = sys.stdout
    sys.stdout = sys.stderr  # the tool's prints must not corrupt the reply line
    request = json.loads(sys.stdin.read())
    from echo_tools.backends.python_targets import import_target, plan_call
    from echo_tools.jsonvalue import to_json_value
    from echo_tools.models import ToolDef

    tool = ToolDef.model_validate(request["tool"])
    if request.get("builtin"):
        claim_builtin_package()
    try:
        _, fn = import_target(tool, request["allowed_modules"])
        plan = plan_call(tool, fn)
        positional, keywords = plan.arguments(request["args"])
        result = fn(*positional, **keywords)
        if plan.is_async or asyncio.iscoroutine(result):
            result = asyncio.run(result)
        reply = {"ok": True, "output": to_json_value(result)}
    except Exception as exc:  # boundary: the tool's own code, reported to the parent as text
        reply = {"ok": False, "error": f"Tool {tool.tool_id!r} raised {type(exc).__name__}: {exc}"}
    out.write(json.dumps(reply, default=str) + "\n")
    out.flush()


if __name__ == "__main__":
    _child()
