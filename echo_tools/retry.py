"""When a failed attempt of a tool call may be retried, and how long to wait before the next one.

Only tools declared `pure` or `idempotent` are retried, and only after an execution error or a timeout:
a refused egress, a bad configuration or an input the tool rejected will fail the same way again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from echo_tools.errors import (
    EgressDeniedError,
    ToolError,
    ToolExecutionError,
    ToolInputRejectedError,
    ToolTimeoutError,
)
from echo_tools.models import SideEffect

if TYPE_CHECKING:
    from echo_tools.models import ToolDef

RETRYABLE_SIDE_EFFECTS = frozenset({SideEffect.PURE, SideEffect.IDEMPOTENT})
MAX_BACKOFF_S = 30.0


def max_attempts(tool: ToolDef) -> int:
    """1 plus `retry.max_retries` for pure/idempotent tools; 1 for every other tool."""
    if tool.side_effect in RETRYABLE_SIDE_EFFECTS:
        return 1 + tool.retry.max_retries
    return 1


def is_retryable(error: ToolError) -> bool:
    """True for timeouts and execution errors, except a refused egress or an input the tool rejected
    (either would fail the same way again)."""
    if isinstance(error, (EgressDeniedError, ToolInputRejectedError)):
        return False
    return isinstance(error, (ToolExecutionError, ToolTimeoutError))


def again(tool: ToolDef, error: ToolError, attempts: int) -> bool:
    """True when a call of `tool` that failed with `error` after `attempts` attempts runs once more."""
    return attempts < max_attempts(tool) and is_retryable(error)


def backoff_s(tool: ToolDef, attempt: int) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based): backoff_ms * 2**(attempt - 1)."""
    return min(MAX_BACKOFF_S, tool.retry.backoff_ms / 1000 * (2 ** (attempt - 1)))
