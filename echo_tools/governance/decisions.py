"""Carrying a decision out: how an approved call runs, in whichever process can run it, with the scope of
the call that asked (never the decider's), and how the process that asked waits for the decision.

`preparer(executor)` is what `Governance.decide` and `Governance.carry_out` ask of a record: the call as it
runs here (the tool as it was approved, under the kept scope restored), the error that voids the approval
(the tool changed, the scope was tampered with or its principal is gone), or why this process cannot run it
(its catalogue has no such tool: the decision is kept and the process that asked runs it).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Protocol

from echo_tools.errors import ScopeKeyElsewhere, ToolError, ToolNotFoundError
from echo_tools.gate import CallScope
from echo_tools.governance.approvals import PENDING, RUNNING, ApprovalDecisionError, check_record
from echo_tools.models import ToolContext
from echo_tools.suggest import tool_hint

if TYPE_CHECKING:
    from echo_tools.gate import PrincipalLookup
    from echo_tools.governance.approvals import ApprovalRecord
    from echo_tools.governance.stage import Governance, Prepare
    from echo_tools.models import ToolDef, ToolResult
    from echo_tools.registry import ToolRegistry
    from echo_tools.routes import Route

__all__ = ["preparer", "validator", "wait_for_decision"]


class ToolExecutor(Protocol):
    """What carrying a decision out uses of the executor (`echo_tools.ToolExecutor` is the one)."""

    registry: ToolRegistry
    governance: Governance

    def route_of(self, tool: ToolDef) -> Route: ...

    def invoke_sync(self, ref: str | ToolDef, input_data: Any = None, context: Any = None) -> ToolResult: ...


def validator(executor: ToolExecutor) -> Any:
    """`tool_id -> checked_input` of the tool's current version (an edit decision's arguments)."""

    def validate(tool_id: str) -> Any:
        tool = executor.registry.resolve(tool_id)
        if tool is None:
            return lambda _args: ToolNotFoundError(f"No tool matches {tool_id!r}", field="tool")
        return executor.route_of(tool).checked_input

    return validate


def preparer(executor: ToolExecutor, principals: PrincipalLookup | None = None) -> Prepare:
    """How an approved call runs in `executor`'s process (see the module docstring)."""

    def prepare(record: ApprovalRecord) -> Any:
        tool = executor.registry.resolve(record.tool_id)
        if tool is None:
            return (
                f"this process has no tool {record.tool_id!r}{tool_hint(executor.registry, record.tool_id)}: "
                "the call runs in a process whose catalogue has it (the one that asked waits for the "
                "decision: ToolExecutor.wait_for_decision)"
            )
        seal = executor.governance.approvals.seal
        what = f"approval {record.approval_id!r}"
        try:
            check_record(record, seal)  # the tool, arguments, digest, scope and asker it was sealed with
            scope = CallScope.from_record(record.scope, seal, principals=principals, what=what)
        except ScopeKeyElsewhere as exc:  # not checkable here: the decision is kept for the asking process
            return f"{exc.message}; the call runs in the process that asked"
        except ToolError as exc:  # changed, unsealed, or asked by a principal that is gone: void
            return exc
        if record.digest != tool.digest:
            return executor.governance.void_error(record, tool)
        context = ToolContext.model_validate(record.context)
        context = scope.apply(context.model_copy(update={"principal": None, "granted_permissions": None}))
        return lambda: executor.invoke_sync(tool, record.args, context)

    return prepare


async def wait_for_decision(
    executor: ToolExecutor,
    approval_id: str,
    *,
    timeout_s: float,
    poll_s: float,
    principals: PrincipalLookup | None,
) -> ToolResult:
    """`ToolExecutor.wait_for_decision`: poll the store until the approval is decided (or run elsewhere),
    then carry the decision out in a worker thread (the call may block)."""
    for name, value, most in (("timeout_s", timeout_s, 7 * 86_400.0), ("poll_s", poll_s, 60.0)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= most:
            raise ValueError(
                f"{name} must be a number of seconds above 0 and at most {most:g}, got {value!r}"
            )
    store = executor.governance.approvals
    deadline = time.monotonic() + timeout_s
    while True:
        record = await asyncio.to_thread(store.get, approval_id) if store.blocking else store.get(approval_id)
        if record is None:
            raise ApprovalDecisionError(
                f"no approval has id {approval_id!r}",
                status=404,
                field="approval_id",
                approval_id=approval_id,
            )
        if record.status not in (PENDING, RUNNING) or time.monotonic() >= deadline:
            prepare = preparer(executor, principals)
            return await asyncio.to_thread(executor.governance.carry_out, record, prepare)
        await asyncio.sleep(poll_s)
