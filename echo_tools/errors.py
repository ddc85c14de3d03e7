"""The exception tree of echo-tools.

Misuse of the API raises; a tool that fails returns a `ToolResult` with `success=False`, and
`ToolResult.raise_for_error()` turns it into the matching class below.

    ToolError
    ├── ToolNotFoundError            no tool matches the reference
    │   └── NotStoredError           no stored workflow or agent has that id
    ├── ToolDisabledError            the tool exists but is disabled
    ├── ToolRegistrationError        a tool definition was refused (bad id, schema, module, name clash)
    │   ├── ToolNameConflictError    another tool already has that name (case-insensitively)
    │   └── ToolReadOnlyError        the tool's source makes it read-only to this caller
    ├── ToolStorageError             the storage folder cannot be read or written
    ├── ToolValidationError          input failed the tool's input schema
    │   └── ToolOutputValidationError  output failed the tool's output schema
    ├── ToolPermissionError          the tool needs a permission the caller did not grant
    ├── ToolExecutionError           the tool ran and failed
    │   ├── ToolInputRejectedError   the tool refused its input (ValueError/TypeError): never retried
    │   ├── EgressDeniedError        an outbound request was refused by the egress policy
    │   └── MCPConnectionError       an MCP server could not be reached or died
    ├── ToolTimeoutError             the call ran past its deadline and was stopped
    ├── ToolDeniedError              a hook denied the call, or failed (the call fails closed)
    ├── ApprovalRequiredError        the call waits for a person's approval (`approval_id` in details)
    ├── ApprovalRejectedError        a person rejected the call
    ├── QuotaExceededError           over a quota (`retry_after_s` in details)
    ├── ToolBudgetError              the request's budget (calls, depth, fan-out, time, output) is spent
    ├── ScopeRestoreError            a kept scope cannot be restored (changed, malformed, principal gone)
    │   └── ScopeKeyElsewhere        it was sealed with another key: it cannot be checked in this process
    └── ToolConfigError              a configuration (MCP server, executor setting) is invalid
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol


class _FailedCall(Protocol):
    """What `error_for_result` reads of a failed call (a `ToolResult`; this module imports no model)."""

    tool_id: str
    error: str | None
    error_type: str | None


class ToolError(Exception):
    """Root of every error echo-tools raises.

    `error_type` is the `ToolResult.error_type` of a family, given once in the class statement where the
    family starts (`class ToolTimeoutError(ToolError, error_type="timeout")`) and inherited below it;
    the root's `"execution"` is that of `ToolExecutionError` and of every class outside a family.
    """

    error_type: ClassVar[str] = "execution"

    def __init_subclass__(cls, *, error_type: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if error_type is not None:
            cls.error_type = error_type

    def __init__(self, message: str, *, tool_id: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.tool_id = tool_id
        self.field = field

    def __reduce__(self) -> tuple[Any, ...]:
        # keep tool_id and field when an error crosses a process boundary (multiprocessing, pickle)
        return (_rebuild_error, (type(self), self.message, self.tool_id, self.field))


class ToolNotFoundError(ToolError, error_type="not_found"):
    """No tool matches the reference."""


class NotStoredError(ToolNotFoundError):
    """No stored workflow or agent has that id (`WorkflowStore`, `AgentStore`)."""


class ToolDisabledError(ToolError, error_type="disabled"):
    """The tool exists but its status is `disabled`."""


class ToolRegistrationError(ToolError, error_type="validation"):
    """A tool definition was refused at registration."""


class ToolNameConflictError(ToolRegistrationError):
    """Another tool already has that name, compared case-insensitively."""


class ToolReadOnlyError(ToolRegistrationError):
    """The tool exists and its source (builtin, mcp, openapi, python) makes it read-only to this caller."""


class ToolStorageError(ToolError):
    """The storage folder cannot be read or written."""


class ToolValidationError(ToolError, error_type="validation"):
    """Input failed the tool's input schema."""


class ToolOutputValidationError(ToolValidationError, error_type="output_validation"):
    """Output failed the tool's output schema."""


class ToolPermissionError(ToolError, error_type="permission_denied"):
    """The tool needs a permission that the caller's context does not grant."""


class ToolExecutionError(ToolError):
    """The tool ran and failed."""


class ToolInputRejectedError(ToolExecutionError):
    """The tool ran and refused its input (it raised ValueError or TypeError); a retry would fail alike."""


class EgressDeniedError(ToolExecutionError):
    """An outbound request was refused by the egress policy."""


class MCPConnectionError(ToolExecutionError):
    """An MCP server could not be reached, did not start, or died."""


class ToolTimeoutError(ToolError, error_type="timeout"):
    """The call ran past its deadline and its work was stopped."""


class ToolBudgetError(ToolError, error_type="budget"):
    """The request's or run's budget (calls, depth, fan-out, deadline, output, sampling) is spent."""


class ScopeRestoreError(ToolError, error_type="denied"):
    """A deferred call's or paused run's kept scope was changed, is malformed, or names a principal that is
    gone: nothing runs under it."""


class ScopeKeyElsewhere(ScopeRestoreError):
    """A kept scope was sealed with another key than this process has: it cannot be checked here (decide
    or resume where the key is the same); nothing runs here."""


class ToolConfigError(ToolError, error_type="validation"):
    """A configuration (MCP server, executor setting) is invalid."""


class _Detailed(ToolError):
    """An error whose result carries `details` in its `metadata` (`approval_id`, `retry_after_s`)."""

    def __init__(
        self, message: str, *, tool_id: str | None = None, field: str | None = None, **details: Any
    ) -> None:
        super().__init__(message, tool_id=tool_id, field=field)
        self.details = details


class ToolDeniedError(_Detailed, error_type="denied"):
    """A hook denied the call, or raised (the call fails closed, naming the hook)."""


class ApprovalRequiredError(_Detailed, error_type="approval_required"):
    """The call needs a person's approval; `details["approval_id"]` names the pending approval."""


class ApprovalRejectedError(_Detailed, error_type="rejected"):
    """A person rejected the call; it did not run."""


class QuotaExceededError(_Detailed, error_type="quota"):
    """The call is over a quota; `details["retry_after_s"]` says when one more call fits."""


_BY_ERROR_TYPE: dict[str, type[ToolError]] = {
    "not_found": ToolNotFoundError,
    "disabled": ToolDisabledError,
    "permission_denied": ToolPermissionError,
    "validation": ToolValidationError,
    "execution": ToolExecutionError,
    "timeout": ToolTimeoutError,
    "output_validation": ToolOutputValidationError,
    "denied": ToolDeniedError,
    "approval_required": ApprovalRequiredError,
    "rejected": ApprovalRejectedError,
    "quota": QuotaExceededError,
    "budget": ToolBudgetError,
}


def _rebuild_error(cls: type[ToolError], message: str, tool_id: str | None, field: str | None) -> ToolError:
    return cls(message, tool_id=tool_id, field=field)


def error_for_result(result: _FailedCall) -> ToolError:
    """The exception matching a failed `ToolResult`'s `error_type`."""
    cls = _BY_ERROR_TYPE.get(result.error_type or "execution", ToolExecutionError)
    return cls(result.error or f"Tool {result.tool_id!r} failed", tool_id=result.tool_id)
