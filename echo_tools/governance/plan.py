"""What the governance stage does for one tool, worked out once per tool version, not once per call.

`Governance.plan(tool)` answers a `CallPlan` (or None when nothing applies to the tool: the pipeline then
skips the stage): the hooks' bound `before` / `after` methods, whether an approval can be asked at all,
and one counting function per quota with its counter key already built. A call then does only what its
plan says: the hooks, one contextvar read (an approval `decide` may be running it), and one count per
quota. Plans are dropped when a hook is added or removed, and rebuilt when the tool changes.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from echo_tools.call import Call
from echo_tools.errors import ToolError
from echo_tools.governance.hooks import hook_raised, judge, run_after
from echo_tools.governance.quotas import QuotaCount, QuotaGiveBack, counting, quota_error, scope_reader
from echo_tools.models import Approval, ToolResult

if TYPE_CHECKING:
    from echo_tools.governance.approvals import ApprovalPolicy, ApprovalStore
    from echo_tools.governance.quotas import QuotaCounter
    from echo_tools.models import Quota, ToolDef

Validate = Callable[[dict[str, Any]], "dict[str, Any] | ToolError"]
OFF_LOOP = object()  # `before`'s answer when the rest must wait for a database, off the event loop


class Grant:
    """The approval `Governance.decide` runs a call under: used by the first call of its tool, once."""

    __slots__ = ("approval_id", "tool_id", "used")

    def __init__(self, approval_id: str, tool_id: str) -> None:
        self.approval_id, self.tool_id, self.used = approval_id, tool_id, False


GRANT: contextvars.ContextVar[Grant | None] = contextvars.ContextVar(
    "echo_tools_approval_grant", default=None
)
_granted = GRANT.get  # bound once
# one item per `decide` running an approved call now (list appends and pops are atomic): while it is
# empty, no call can run under a grant and the contextvar is not read at all
GRANTING: list[None] = []

# one quota of a plan: (count one call under a scope value, give it back, read the call's scope value,
# the quota, "tool" or "executor")
_Counted = tuple[QuotaCount, QuotaGiveBack, Callable[[Call], Any], "Quota", str]


class Stage(Protocol):
    """What a plan reads of the governance stage it belongs to (`echo_tools.governance.stage.Governance`)."""

    befores: tuple[tuple[Any, Callable[..., Any]], ...]
    afters: tuple[tuple[Any, Callable[..., Any]], ...]
    quotas: tuple[Quota, ...]
    counter: QuotaCounter
    approvals: ApprovalStore

    @property
    def approval_policy(self) -> ApprovalPolicy | None: ...

    def approve_and_count(
        self, call: Call, validate: Validate
    ) -> dict[str, Any] | ToolError | ToolResult: ...

    def finish(self, call: Call, result: ToolResult) -> ToolResult: ...


class CallPlan:
    """The governance of one tool version: see the module docstring."""

    __slots__ = ("afters", "asks", "befores", "counts", "governance", "off_loop", "on", "tool")

    def __init__(self, governance: Stage, tool: ToolDef) -> None:
        self.governance, self.tool = governance, tool
        self.befores = governance.befores
        self.afters = governance.afters
        # an approval can be asked for this tool (else only a `decide` running it needs the approval part)
        self.asks = governance.approval_policy is not None or tool.approval is not Approval.NEVER
        counter = governance.counter
        self.counts: tuple[_Counted, ...] = tuple(
            [(*counting(counter, tool.tool_id, q), scope_reader(q.scope), q, "tool") for q in tool.quotas]
            + [(*counting(counter, None, q), scope_reader(q.scope), q, "executor") for q in governance.quotas]
        )
        self.on = bool(self.befores or self.afters or self.asks or self.counts)
        # counting waits for a database: a call on the event loop does it in a worker thread
        self.off_loop = counter.blocking

    def before(
        self, call: Call, validate: Validate, on_loop: bool
    ) -> dict[str, Any] | ToolError | ToolResult | object:
        """The arguments the call runs with (`call.args` itself when nothing changed them), the error
        that stops it, or the result it already had; or `OFF_LOOP`: then await `Governance.before_off_loop`."""
        for hook, before in self.befores:  # every hook's `before`, in order (the one place they run)
            try:
                verdict = before(call)
            except Exception as exc:  # boundary: a failing hook fails the call closed, named
                return hook_raised(call, hook, exc)
            if verdict is not None:
                stopped = judge(call, hook, verdict, validate)
                if stopped is not None:  # denied, or replaced arguments that do not validate
                    return stopped
        if self.asks or (GRANTING and _granted() is not None):
            governance = self.governance
            if on_loop and (governance.approvals.blocking or self.off_loop):
                return OFF_LOOP
            return governance.approve_and_count(call, validate)
        counts = self.counts
        if not counts:
            return call.args
        if on_loop and self.off_loop:
            return OFF_LOOP
        return self.count(call)

    def count(self, call: Call) -> dict[str, Any] | ToolError:
        """The call's arguments once it is counted against its quotas, or the error of the first one it
        is over."""
        for counted in self.counts:
            take, _, read, quota, where = counted
            wait = take(read(call))
            if wait:  # over quota: the seconds until one more call fits
                self._give_back(call, counted)
                return quota_error(call, quota, wait, where)
        return call.args

    def _give_back(self, call: Call, refusing: _Counted) -> None:
        """Uncount a call refused by the quota `refusing` in the quotas before it, which counted it."""
        for counted in self.counts:
            if counted is refusing:
                return
            _, give_back, read, _, _ = counted
            give_back(read(call))

    def after(self, call: Call, result: ToolResult) -> ToolResult:
        """The result the caller gets (every `after` hook applied), kept with the call's approval."""
        if self.afters:
            result = run_after(self.afters, call, result)
        if call.approval_id is not None:
            result = self.governance.finish(call, result)
        return result
