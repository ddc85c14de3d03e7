"""How a tool call ends: the one table that turns whatever step 6 raised into the call's `ToolError`, and
the errors of a call refused or stopped (permissions not granted, a deadline, a cancellation).

Backends translate the exceptions of the code they run (`from exc`); what still reaches the executor is
mapped here, once, and the `ToolResult` takes its `error_type` and `error_field` from the result.
"""

from __future__ import annotations

from echo_tools.errors import (
    ToolConfigError,
    ToolError,
    ToolExecutionError,
    ToolPermissionError,
    ToolTimeoutError,
)
from echo_tools.inline import InlineOverrun
from echo_tools.models import ToolDef, ToolPermission
from echo_tools.runtime import WaitTimedOut, WorkersBusy


def permission_refusal(tool: ToolDef, granted: list[ToolPermission]) -> ToolPermissionError | None:
    """The refusal of a call whose tool needs permissions the caller did not grant (step 2); None when
    every one it needs is granted."""
    missing = [p.value for p in tool.permissions if p not in granted]
    if not missing:
        return None
    return ToolPermissionError(
        f"Tool {tool.tool_id!r} needs permissions {missing!r} that the caller did not grant "
        f"(granted: {[p.value for p in granted]!r})",
        tool_id=tool.tool_id,
        field="permissions",
    )


def as_tool_error(exc: BaseException, tool: ToolDef, timeout_ms: float) -> ToolError:
    """The error of a call whose run raised `exc` (chained to it)."""
    if isinstance(exc, ToolError):
        return exc
    if isinstance(exc, WaitTimedOut):  # a worker thread cannot be stopped: say so, never "stopped"
        error: ToolError = ToolTimeoutError(
            f"Tool {tool.tool_id!r} did not finish within its timeout of {timeout_ms:g} ms; it runs in a "
            "worker thread, which cannot be stopped, so it was abandoned and may still be running (its "
            'result will be dropped); a stored local tool can declare isolation: "process" to be stopped',
            tool_id=tool.tool_id,
        )
    elif isinstance(exc, InlineOverrun):
        error = ToolTimeoutError(
            f"Tool {tool.tool_id!r} ran inline past its timeout of {timeout_ms:g} ms (it finished; an inline "
            "tool cannot be cut short) and its output was dropped",
            tool_id=tool.tool_id,
        )
    elif isinstance(exc, TimeoutError):  # a deadline of ours: backends translate the tools' own
        error = timeout_error(tool, timeout_ms)
    elif isinstance(exc, WorkersBusy):
        error = ToolExecutionError(f"Tool {tool.tool_id!r} was not run: {exc}", tool_id=tool.tool_id)
    else:  # a backend bug must still end as a failed result
        error = ToolExecutionError(f"Tool {tool.tool_id!r} failed: {exc!r}", tool_id=tool.tool_id)
    error.__cause__ = exc
    return error


def timeout_error(tool: ToolDef, timeout_ms: float) -> ToolTimeoutError:
    """The error of a call stopped at its deadline."""
    return ToolTimeoutError(
        f"Tool {tool.tool_id!r} did not finish within its timeout of {timeout_ms:g} ms and was stopped",
        tool_id=tool.tool_id,
    )


def cancelled_error(tool: ToolDef) -> ToolExecutionError:
    """The error of a call its caller gave up on (it still gets its closing event)."""
    return ToolExecutionError(
        f"Tool {tool.tool_id!r}: the call was cancelled by its caller", tool_id=tool.tool_id
    )


def result_error_type(error: ToolError) -> str:
    """The `ToolResult.error_type` of a call that failed with `error`."""
    # A tool that cannot be loaded when called failed to execute; "validation" would tell the caller to
    # fix its input. (Raised at registration, the same class is a refused definition: errors.py.)
    return "execution" if isinstance(error, ToolConfigError) else error.error_type
