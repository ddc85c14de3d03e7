"""How a tool call ends: what its run (step 6) produced, and the errors the executor itself reports.

A run that returns has an `Outcome` (or, on the inline fast path, just its raw output); a deadline that
passes, a caller that gives up and a tool that cannot load each end as a failed result of a named type.
"""

from __future__ import annotations

from typing import Any

from echo_tools.errors import ToolConfigError, ToolError, ToolExecutionError, ToolTimeoutError
from echo_tools.models import ToolDef

NOT_RUN: Any = object()  # the tool has no inline path: run it another way


class Outcome:
    """What step 6 produced: the raw output and metadata, or the error of the last attempt."""

    __slots__ = ("attempts", "error", "metadata", "output")

    def __init__(
        self,
        output: Any = None,
        metadata: dict[str, Any] | None = None,
        error: ToolError | None = None,
        attempts: int = 1,
    ) -> None:
        self.output = output
        self.metadata = metadata if metadata is not None else {}
        self.error = error
        self.attempts = attempts


def timeout_error(tool: ToolDef, timeout_ms: float) -> ToolTimeoutError:
    """The error of a call stopped at its deadline."""
    return ToolTimeoutError(
        f"Tool {tool.tool_id!r} did not finish within its timeout of {timeout_ms:g} ms and was stopped",
        tool_id=tool.tool_id,
    )


def cancelled(tool: ToolDef, attempt: int) -> Outcome:
    """The outcome of a call its caller gave up on during `attempt`."""
    # it still gets its closing event, so no tool.invoked dangles
    error = ToolExecutionError(
        f"Tool {tool.tool_id!r}: the call was cancelled by its caller", tool_id=tool.tool_id
    )
    return Outcome(error=error, attempts=attempt)


def result_error_type(error: ToolError) -> str:
    """The `ToolResult.error_type` of a call that ran and failed with `error`."""
    # A tool that cannot be loaded failed to execute; "validation" would tell the caller to fix its input.
    return "execution" if isinstance(error, ToolConfigError) else error.error_type
