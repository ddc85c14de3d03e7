"""The governance stage of the executor's pipeline: hooks, approvals and quotas, in that order.

`ToolExecutor` asks `Governance.plan(tool)` once the input is validated (step 4); when a plan applies
(`echo_tools.governance.plan`, worked out once per tool version), it runs the plan's `before` before the
tool runs and its `after` once the result is made (steps 7-9). Nothing else runs them: there is no second
pipeline. Before: every hook's `before` (Deny / Replace, replaced arguments validated again), then the
approval (a pause inside a graph, `approval_required` outside one, or the approved call claimed in one
step), then the quotas (a refused call is not counted). After: every hook's `after`, then the result kept
with the approval it ran under, so a repeat of the call gets that result instead of running again.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.call import Call
from echo_tools.errors import (
    ApprovalRejectedError,
    ApprovalRequiredError,
    QuotaExceededError,
    ScopeKeyElsewhere,
    ScopeRestoreError,
    ToolDeniedError,
    ToolError,
)
from echo_tools.gate import CallScope
from echo_tools.governance import approvals as ap
from echo_tools.governance.hooks import bound, check_hook
from echo_tools.governance.plan import GRANT, GRANTING, OFF_LOOP, CallPlan, Grant, Validate
from echo_tools.governance.quotas import MemoryQuotaCounter, QuotaCounter
from echo_tools.models import Approval, Quota, ToolContext, ToolResult

if TYPE_CHECKING:
    from echo_tools.models import ToolDef

__all__ = ["OFF_LOOP", "Governance"]  # OFF_LOOP (from `plan`) is what the executor compares verdicts to


class Governance:
    """Hooks, the approval policy and store, and quotas of one executor (see the module docstring)."""

    def __init__(
        self,
        *,
        approval_policy: ap.ApprovalPolicy | None = None,
        approvals: ap.ApprovalStore | None = None,
        quotas: Iterable[Quota] = (),
        quota_counter: QuotaCounter | None = None,
    ) -> None:
        self.hooks: list[Any] = []
        self.changed: Callable[[], None] = lambda: None  # told when the plans change (the executor's routes)
        self.approvals: ap.ApprovalStore = approvals if approvals is not None else ap.MemoryApprovalStore()
        self.quotas = tuple(Quota.model_validate(q) for q in quotas)
        self.counter: QuotaCounter = quota_counter if quota_counter is not None else MemoryQuotaCounter()
        self.approval_policy = approval_policy  # (re)builds the plans

    @property
    def approval_policy(self) -> ap.ApprovalPolicy | None:
        return self._policy

    @approval_policy.setter
    def approval_policy(self, policy: ap.ApprovalPolicy | None) -> None:
        self._policy = policy
        self._refresh()

    def _refresh(self) -> None:
        # worked out once per change, not per call: each hook's bound `before` / `after`, and every plan
        self.befores = bound(self.hooks, "before")
        self.afters = bound(self.hooks, "after")
        self._plans: dict[str, CallPlan] = {}
        self.changed()

    def add_hook(self, hook: Any) -> None:
        self.hooks.append(check_hook(hook))
        self._refresh()

    def remove_hook(self, hook: Any) -> None:
        self.hooks.remove(hook)
        self._refresh()

    def plan(self, tool: ToolDef) -> CallPlan | None:
        """What this stage does for calls of `tool` (None: nothing, the pipeline skips it)."""
        plan = self._plans.get(tool.tool_id)
        if plan is None or plan.tool is not tool:  # a new tool, or a new version of it
            plan = self._plans[tool.tool_id] = CallPlan(self, tool)
        return plan if plan.on else None

    # -- before the tool runs ------------------------------------------------------------------------

    async def before_off_loop(
        self, call: Call, validate: Validate
    ) -> dict[str, Any] | ToolError | ToolResult:
        """The approval and quota part of `before`, in a worker thread (in the caller's context)."""
        return await asyncio.to_thread(contextvars.copy_context().run, self.approve_and_count, call, validate)

    def approve_and_count(self, call: Call, validate: Validate) -> dict[str, Any] | ToolError | ToolResult:
        """The approval part of `before` (ask, or claim the approved call in one step), then the quotas."""
        grant = GRANT.get()
        tool = call.tool
        if grant is None and self._policy is None and tool.approval is Approval.NEVER:
            return self._count(call)  # no approval can apply: only the quotas (the common case)
        if grant is not None and not grant.used and grant.tool_id == tool.tool_id:
            grant.used = True  # the call `decide` approved; the tools it calls in turn ask for themselves
            call.approval_id = grant.approval_id
        elif self._policy is not None or tool.approval is not Approval.NEVER:
            try:
                asks = ap.needs_approval(tool, call, self._policy)
            except Exception as exc:  # boundary: a failing policy fails the call closed, named
                return ToolDeniedError(
                    f"Tool {tool.tool_id!r}: the approval policy raised {type(exc).__name__}: {exc}; "
                    "the call was not run",
                    tool_id=tool.tool_id,
                    field="approval",
                )
            if asks:
                answer = self._approval(call, validate)
                if answer is not None:
                    return answer
        if call.approval_id is not None:  # a graph node running again after the resume: ran already?
            record = self.approvals.get(call.approval_id)
            if record is not None and record.status == ap.DONE:
                return self._ran_already(call)
        counted = self._count(call)
        if counted is not call.args:
            return counted
        if call.approval_id is not None and not self.approvals.claim(call.approval_id):
            return self._ran_already(call)
        return call.args

    def _count(self, call: Call) -> dict[str, Any] | ToolError:
        """The call's arguments once it is counted against its quotas, or the error of one it is over."""
        plan = self.plan(call.tool)
        return call.args if plan is None else plan.count(call)

    def _approval(self, call: Call, validate: Validate) -> ToolError | ToolResult | None:
        """None when the call may go on (approved: `call.approval_id` set), else why it may not."""
        from echo_tools.governance.pause import graph_position, pause

        position = graph_position()
        context = call.context.model_dump(mode="json", exclude_none=True)
        owner = _owner(call.context)
        store = self.approvals
        if position is None:  # nobody can be asked now: the call waits for `decide`
            crowded = self._crowded(call, owner)
            if crowded is not None:
                return crowded
            record = store.add(self._record(ap.new_approval_id(), call, context, owner, "call"))
            return ApprovalRequiredError(
                f"Tool {call.tool_id!r} needs a person's approval before it runs; approval "
                f"{record.approval_id!r} is pending (echo-tools approvals approve {record.approval_id})",
                tool_id=call.tool_id,
                field="approval",
                approval_id=record.approval_id,
            )
        thread, task = position
        context.setdefault("run_id", thread)  # the run to resume is the graph's thread
        approval_id = ap.graph_approval_id(thread, task, call.context.tool_call_id, call.tool_id, call.args)
        if store.get(approval_id) is None:  # asked now, not the paused node running again on resume
            crowded = self._crowded(call, owner)
            if crowded is not None:
                return crowded
        record = store.add(self._record(approval_id, call, context, owner, "run"))
        if record.digest is not None and record.digest != call.tool.digest:  # re-registered meanwhile
            void = self.void_error(record, call.tool)
            store.void(approval_id, void.message)
            return void
        payload = {
            "type": "tool_approval",
            "approval_id": approval_id,
            "tool": call.tool_id,
            "args": call.args,
            "agent_name": call.context.agent_name,
        }
        resumed = pause(payload)  # pauses the run the first time; the decision when it runs again
        if resumed is None or resumed == "decided":  # decided in the store (`echo-tools approvals`)
            resumed = self._stored_decision(approval_id)
            if isinstance(resumed, ToolError):
                return resumed
        decision, args, comment = _parse_decision(resumed)
        if decision == "reject":
            record.status, record.decision, record.comment = ap.REJECTED, "reject", comment
            store.decide(record)
            said = f": {comment}" if comment else ""
            return ApprovalRejectedError(
                f"Tool {call.tool_id!r}: a reviewer rejected this call{said}; it did not run",
                tool_id=call.tool_id,
                field="approval",
                approval_id=approval_id,
            )
        if decision == "edit" and args is not None:
            checked = validate(dict(args))
            if isinstance(checked, ToolError):
                return checked
            call.args = record.args = checked
        record.status, record.decision, record.comment = ap.APPROVED, decision, comment
        store.decide(record)  # already approved by `echo-tools approvals`: nothing changes
        stored = store.get(approval_id)
        if stored is not None and stored.args and decision != "edit":
            call.args = stored.args  # an edit decided through the store
        call.approval_id = approval_id
        return None

    def _record(
        self, approval_id: str, call: Call, context: dict[str, Any], owner: str | None, kind: str
    ) -> ap.ApprovalRecord:
        """The approval of `call`: what it calls, with which arguments, under which scope and definition."""
        scope = CallScope.of(call.context).to_record(self.approvals.seal)
        record = ap.ApprovalRecord(
            approval_id, call.tool_id, call.tool.name, call.args, context, kind=kind, owner=owner,
            digest=call.tool.digest, scope=scope, expires_at=ap.now_text(call.tool.approval_ttl_s),
        )  # fmt: skip
        ap.seal_record(record, self.approvals.seal)
        return record

    def _crowded(self, call: Call, owner: str | None) -> ToolError | None:
        """The refusal of one more pending approval for a principal that already has `MAX_PENDING`."""
        if self.approvals.pending_count(owner) < ap.MAX_PENDING:
            return None
        return QuotaExceededError(
            f"Tool {call.tool_id!r}: principal {owner or 'operator'!r} already has {ap.MAX_PENDING} "
            "approvals pending; decide or let some expire before asking for more",
            tool_id=call.tool_id,
            field="approval",
            retry_after_s=60.0,
        )

    def void_error(self, record: ap.ApprovalRecord, tool: ToolDef) -> ToolError:
        """Why an approval whose tool changed since it was asked is void: the reviewer approved another call."""
        reason = (
            f"approval {record.approval_id!r} is void: tool {record.tool_id!r} was changed since the approval "
            f"was asked (its definition {str(record.digest)[:12]} is now {tool.digest[:12]}); nothing ran, "
            "ask for a new approval of the call as the tool is now"
        )
        return ToolDeniedError(
            reason, tool_id=record.tool_id, field="approval", approval_id=record.approval_id
        )

    def _stored_decision(self, approval_id: str) -> dict[str, Any] | ToolError:
        """The decision kept in the store for a run resumed with "decided" (or nothing)."""
        record = self.approvals.get(approval_id)
        if record is None or record.status == ap.PENDING:
            return ApprovalRequiredError(
                f"approval {approval_id!r} is not decided yet; the call did not run "
                f"(echo-tools approvals approve {approval_id})",
                field="approval",
                approval_id=approval_id,
            )
        if record.status == ap.REJECTED:
            return {"decision": "reject", "comment": record.comment}
        problem = self._unsealable(record)
        if problem is not None:  # edited arguments are taken from the store only when its seal holds here
            message = problem.message if isinstance(problem, ToolError) else problem
            return ToolDeniedError(message, tool_id=record.tool_id, field="approval", approval_id=approval_id)
        return {"decision": "approve", "args": record.args, "comment": record.comment}

    def _ran_already(self, call: Call) -> ToolError | ToolResult:
        """The approved call has run (its result comes back) or is running elsewhere (refused)."""
        record = self.approvals.get(call.approval_id or "")
        if record is not None and record.status == ap.DONE and record.result is not None:
            return _ran(record)
        status = record.status if record is not None else "unknown"
        return ToolDeniedError(
            f"Tool {call.tool_id!r}: approval {call.approval_id!r} is {status}; an approved call runs once",
            tool_id=call.tool_id,
            field="approval",
            approval_id=call.approval_id,
        )

    # -- after the tool ran --------------------------------------------------------------------------

    def finish(self, call: Call, result: ToolResult) -> ToolResult:
        """Keep the result of an approved call with its approval, so a repeat gets it instead of a run."""
        self.approvals.finish(call.approval_id or "", result.model_dump(mode="json"))
        result.metadata = {**result.metadata, "approval_id": call.approval_id}
        return result

    # -- decisions -----------------------------------------------------------------------------------

    def decide(
        self,
        approval_id: str,
        decision: str,
        *,
        args: Mapping[str, Any] | None,
        validate: Callable[[str], Validate],
        prepare: Prepare,
        by: str | None = None,
        comment: str | None = None,
        principal: str | None = None,
        admin: bool = True,
    ) -> tuple[ap.ApprovalRecord, ToolResult | None]:
        """Decide a pending approval; an approved `call` approval runs, once, where it can. See
        `ToolExecutor.decide`; `prepare(record)` says how the call runs here (or why it cannot)."""
        if decision not in ap.DECISIONS:
            raise ap.ApprovalDecisionError(
                f"decision must be one of {', '.join(ap.DECISIONS)}, got {decision!r:.80}{_decision_hint(decision)}",
                status=422, field="decision", approval_id=approval_id,
            )  # fmt: skip
        record = self.approvals.get(approval_id)
        if record is None or (not admin and record.owner != principal):
            raise ap.ApprovalDecisionError(
                f"no approval has id {approval_id!r}",
                status=404,
                field="approval_id",
                approval_id=approval_id,
            )
        if record.status != ap.PENDING:
            raise _decided(record)
        elsewhere = self._unsealable(record)  # None: the seal holds here; a str: it cannot be checked here
        if isinstance(elsewhere, ToolError):  # the record was changed: the call never runs
            self.approvals.void(approval_id, elsewhere.message)
            return self.approvals.get(approval_id) or record, _refused(elsewhere, record)
        if decision == "edit":
            if elsewhere is not None:
                raise ap.ApprovalDecisionError(
                    f"{elsewhere}; an edit cannot be sealed here: decide it where the approval was asked",
                    status=409, field="approval_id", approval_id=approval_id,
                )  # fmt: skip
            record.args = self._edited(record, args, validate)
            ap.seal_record(record, self.approvals.seal)
        elif args is not None:
            raise ap.ApprovalDecisionError(
                f"args are only taken with an 'edit' decision, not with {decision!r}",
                status=422, field="args", approval_id=approval_id,
            )  # fmt: skip
        prepared: Prepared | ToolError | str | None = elsewhere
        if record.kind == "call" and decision != "reject" and elsewhere is None:
            prepared = prepare(record)  # before anything is marked: a call that may not run is never approved
            if isinstance(prepared, ToolError):
                self.approvals.void(approval_id, prepared.message)
                voided = self.approvals.get(approval_id) or record
                return voided, _refused(prepared, record)
        record.status = ap.REJECTED if decision == "reject" else ap.APPROVED
        record.decision, record.decided_by, record.comment = decision, by or principal, comment
        record.decided_at = ap.now_text()
        if isinstance(prepared, str):  # this process cannot run it: the decision is kept, the call waits
            record.note = prepared
        if not self.approvals.decide(record):  # another decision came first, or it expired
            latest = self.approvals.get(approval_id)
            raise _decided(latest if latest is not None else record)
        if not callable(prepared) or record.status != ap.APPROVED:
            return record, None
        return record, self._granted(record, prepared)

    def carry_out(self, record: ap.ApprovalRecord, prepare: Prepare) -> ToolResult:
        """The outcome of a decided `call` approval for the process that asked: the call run here, once, when
        it is approved and nobody ran it yet; the kept result when it ran; else a failure saying why."""
        if record.kind != "call" and record.status in (ap.APPROVED, ap.PENDING):
            # a paused run's approval is carried out by resuming that run, under its scope: never here
            error: ToolError = ToolDeniedError(
                f"approval {record.approval_id!r} is of a paused run ({record.run_id!r}), whose resume runs the "
                f"call; it is {record.status} (resume the run to carry the decision on)",
                tool_id=record.tool_id, field="approval", approval_id=record.approval_id,
            )  # fmt: skip
            return _refused(error, record)
        if record.status == ap.APPROVED:
            prepared = prepare(record)
            if isinstance(prepared, ToolError):
                self.approvals.void(record.approval_id, prepared.message)
                return _refused(prepared, record)
            if callable(prepared):
                return self._granted(record, prepared)
            error = ToolDeniedError(
                f"approval {record.approval_id!r} is approved, but {prepared}", tool_id=record.tool_id,
                field="approval", approval_id=record.approval_id,
            )  # fmt: skip
            return _refused(error, record)
        if record.status == ap.DONE and record.result is not None:
            return _ran(record)
        if record.status == ap.REJECTED:
            said = f": {record.comment}" if record.comment else ""
            error = ApprovalRejectedError(
                f"Tool {record.tool_id!r}: a reviewer rejected this call{said}; it did not run",
                tool_id=record.tool_id, field="approval", approval_id=record.approval_id,
            )  # fmt: skip
        elif record.status == ap.PENDING:
            error = ApprovalRequiredError(
                f"approval {record.approval_id!r} is still pending; the call did not run",
                tool_id=record.tool_id, field="approval", approval_id=record.approval_id,
            )  # fmt: skip
        else:  # running elsewhere, void, expired
            why = f": {record.comment}" if record.status == ap.VOID and record.comment else ""
            error = ToolDeniedError(
                f"approval {record.approval_id!r} is {record.status}{why}; the call did not run here",
                tool_id=record.tool_id, field="approval", approval_id=record.approval_id,
            )  # fmt: skip
        return _refused(error, record)

    def _unsealable(self, record: ap.ApprovalRecord) -> ToolError | str | None:
        """None when the record's seal holds in this process; a sentence when this process has another key
        (the decision may be kept, the call runs where the key is); the error when it was changed."""
        try:
            ap.check_record(record, self.approvals.seal)
        except ScopeKeyElsewhere as exc:
            return exc.message
        except ScopeRestoreError as exc:
            return exc
        return None

    def _granted(self, record: ap.ApprovalRecord, run: Prepared) -> ToolResult:
        """Run an approved call under its approval (the pipeline claims it in one step, so once)."""
        GRANTING.append(None)
        token = GRANT.set(Grant(record.approval_id, record.tool_id))
        try:
            return run()
        finally:
            GRANT.reset(token)
            GRANTING.pop()

    def _edited(
        self, record: ap.ApprovalRecord, args: Mapping[str, Any] | None, validate: Callable[[str], Validate]
    ) -> dict[str, Any]:
        approval_id = record.approval_id
        if not isinstance(args, Mapping):
            raise ap.ApprovalDecisionError(
                f"an 'edit' decision needs args (a JSON object), got {args!r:.80}; approval "
                f"{approval_id!r} is still pending",
                status=422, field="args", approval_id=approval_id,
            )  # fmt: skip
        checked = validate(record.tool_id)(dict(args))
        if isinstance(checked, ToolError):
            raise ap.ApprovalDecisionError(
                f"{checked.message}; approval {approval_id!r} is still pending",
                status=422, field=checked.field or "args", approval_id=approval_id,
            )  # fmt: skip
        return checked


Prepared = Callable[[], ToolResult]
# how an approved call runs in this process, the error that voids its approval, or why it cannot run here
Prepare = Callable[[ap.ApprovalRecord], "Prepared | ToolError | str"]


def _refused(error: ToolError, record: ap.ApprovalRecord) -> ToolResult:
    return ToolResult(
        tool_id=record.tool_id, name=record.tool_name, success=False, error=error.message,
        error_type=error.error_type, error_field=error.field, attempts=0,
        metadata={"approval_id": record.approval_id},
    )  # fmt: skip


def _ran(record: ap.ApprovalRecord) -> ToolResult:
    result = ToolResult.model_validate(record.result)
    result.metadata = {**result.metadata, "approval_id": record.approval_id, "ran_before": True}
    return result


def _decision_hint(decision: Any) -> str:
    from echo_tools.suggest import did_you_mean

    return did_you_mean(str(decision), ap.DECISIONS) if isinstance(decision, str) else ""


def _decided(record: ap.ApprovalRecord) -> ap.ApprovalDecisionError:
    by = f" by {record.decided_by!r}" if record.decided_by else ""
    return ap.ApprovalDecisionError(
        f"approval {record.approval_id!r} is already {record.status}{by}; only a pending approval can be decided",
        status=409,
        field="approval_id",
        approval_id=record.approval_id,
    )


def _owner(context: ToolContext) -> str | None:
    principal = getattr(context, "principal", None)  # set by the gate (`echo_tools.gate`) when present
    name = getattr(principal, "name", principal)
    return str(name) if name else None


def _parse_decision(value: Any) -> tuple[str, Mapping[str, Any] | None, str | None]:
    """(decision, edited args, comment) from a LangGraph resume value (a word, or a decision object)."""
    if isinstance(value, str):
        value = {"decision": value}
    if not isinstance(value, Mapping):
        return "reject", None, f"the resume value {value!r:.80} is not a decision"
    decision = value.get("decision", value.get("action"))
    if decision not in ap.DECISIONS:
        return "reject", None, f"the decision {decision!r:.80} is not one of {', '.join(ap.DECISIONS)}"
    args = next(
        (value[k] for k in ("args", "edits", "edited_output") if isinstance(value.get(k), Mapping)), None
    )
    comment = value.get("comment")
    return str(decision), args, comment if isinstance(comment, str) else None
