"""EchoAI's `HITLManager`, answered from the run history: approve, reject and modify resume the paused run
(`runner.resume_run`), defer keeps it paused and marked `deferred`, and the status, context, decisions and
pending list are read from the history. `echoai.install` puts it in place of EchoAI's class.

A run paused at a tool call waiting for approval (a `tool_approval` interrupt, `echo_tools.governance`)
is decided through the same methods: the acting principal needs the `approve` action, the approval is
decided in the approval store first (exactly once, only by its owner or an admin: what
`/tools/approvals/{id}` and `echo-tools approvals` do), then the run is carried on; `modify`'s `changes`
are the call's new arguments, validated against the tool's schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Any

from echo_tools.gate import acting
from echo_tools.governance import ApprovalDecisionError
from workflow_bridge import runner
from workflow_bridge.echoai_host import _note_pause, _outcome, off_the_loop, recorded_status

# `changes` keys that mean EchoAI's other `modify`: an edit of the agent's configuration, not of its result
AGENT_CONFIG_KEYS = ("agent_id", "llm", "prompt", "model", "role", "goal", "tools", "system_prompt")
DEFERRED = "hitl.deferred"  # the history event a deferral is kept as
_HITL_MARKS = (DEFERRED, "run.resumed", "run.interrupted")


class HitlRequestError(ValueError):
    """A HITL request EchoAI's routes answer with 400 (they map ValueError): `field` names what is wrong."""

    def __init__(self, message: str, *, field: str, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class EchoAIHitl:
    """EchoAI's `HITLManager`, answered from the run history: `approve`, `reject` and `modify` resume the
    paused run (`runner.resume_run`) and answer EchoAI's shape plus the resumed run's `run_status` and
    `output`. `modify`'s `changes` are the edit: `edited_output` / `crew_result` as given, else the whole
    object replaces the paused result; agent-config changes (`llm`, `prompt`, ...) are refused. `defer`
    keeps the run paused and marks it `deferred` (until `defer_until`, if given) with who and why.
    Errors (unknown run, not paused, a bad decision) are ValueErrors naming the field: EchoAI's routes
    answer them with 400.

    Args:
        layer: the `ToolLayer` whose history recorded the runs.
    """

    def __init__(self, layer: Any) -> None:
        self.layer = layer

    def __call__(self, *_args: Any, **_kwargs: Any) -> EchoAIHitl:
        return self  # EchoAI's routes call `HITLManager()`: the class is replaced by this object

    def _resume(
        self, run_id: str, action: str, decision: dict[str, Any], actor: str, changes: Any = None
    ) -> dict[str, Any]:
        waiting = self._tool_approvals(run_id)
        if waiting:  # the run waits for a tool call's approval: decided in the approval store first
            decision = self._decide_approvals(run_id, waiting, action, decision, actor, changes)
        decision = {**decision, "actor": actor}  # kept with the decision, as EchoAI's audit trail keeps it

        def work() -> dict[str, Any]:
            return runner.resume_run(
                run_id,
                decision,
                storage=self.layer.history,
                registry=self.layer.registry,
                executor=self.layer.executor,
                llm=self.layer.llm,
            )

        try:
            final = off_the_loop(work)
        except runner.RunResumeError as exc:  # EchoAI's routes answer a ValueError with 400
            raise HitlRequestError(str(exc), field=exc.field) from exc
        outcome = _outcome(final)
        _note_pause(self.layer.history, run_id, final.get("workflow_id"), outcome)  # another HITL node
        return {
            "action": action,
            "run_id": run_id,
            "actor": actor,
            "status": {"approve": "approved", "reject": "rejected", "modify": "modified"}[action],
            **{k: v for k, v in outcome.items() if k != "status"},
            "run_status": (recorded_status(self.layer.history, run_id) or {}).get("status"),
            "failed_calls": (recorded_status(self.layer.history, run_id) or {}).get("failed_calls", []),
        }

    def approve(self, run_id: str, actor: str = "unknown", rationale: str | None = None) -> dict[str, Any]:
        """Resume the paused run with `approve`."""
        return self._resume(run_id, "approve", _decision("approve", rationale), actor)

    def reject(self, run_id: str, actor: str = "unknown", rationale: str | None = None) -> dict[str, Any]:
        """Resume the paused run with `reject`: the run ends, its result says why."""
        return self._resume(run_id, "reject", _decision("reject", rationale), actor)

    def modify(
        self, run_id: str, actor: str = "unknown", changes: Any = None, rationale: str | None = None
    ) -> dict[str, Any]:
        """Resume the paused run with `edit`: `changes` replace the paused node's result (for a run
        waiting for a tool call's approval: the call's new arguments, `changes.args` or `changes`).

        Raises:
            HitlRequestError: `changes` holds an agent-config key (`llm`, `prompt`, ...): EchoAI's modify
                edits the agent and re-validates the workflow, which a paused run cannot take.
        """
        if self._tool_approvals(run_id):
            return self._resume(run_id, "modify", _decision("edit", rationale), actor, changes)
        if isinstance(changes, Mapping):
            for key in AGENT_CONFIG_KEYS:
                if key in changes:
                    raise HitlRequestError(
                        f"hitl modify: changes.{key} is an agent-config change ({key}={changes[key]!r}); "
                        "a paused run cannot take it. Edit the agent and start a new run, or send the "
                        "paused node's corrected result as changes.edited_output",
                        field=f"changes.{key}",
                        value=changes[key],
                    )
        decision = _decision("edit", rationale)
        if isinstance(changes, Mapping) and "edited_output" in changes:
            changes = {"crew_result": changes["edited_output"]}
        decision["edits"] = changes  # not an object: resume_run's 422 names `edits`
        return self._resume(run_id, "modify", decision, actor)

    def defer(
        self,
        run_id: str,
        actor: str = "unknown",
        defer_until: datetime | str | None = None,
        rationale: str | None = None,
    ) -> dict[str, Any]:
        """Postpone the decision, as EchoAI's manager does: the run stays paused, its status is `deferred`
        (off the pending list) until `defer_until` passes, if given, and the deferral is kept with who
        and why among the run's decisions. A later approve, reject or modify still resumes it.

        Raises:
            HitlRequestError: the run is unknown or not paused (`status`), or `defer_until` is not a time.
        """
        history = self.layer.history
        record = history.run(run_id)
        if record is None:
            raise HitlRequestError(f"no recorded run has run_id {run_id!r}", field="run_id", value=run_id)
        if record.get("status") != "interrupted":
            raise HitlRequestError(
                f"run {run_id!r} is {record.get('status')!r}, not 'interrupted': only a run paused at a HITL "
                "node can be deferred",
                field="status",
                value=record.get("status"),
            )
        until = _instant(defer_until)
        from echo_tools.events import ToolEvent

        decision = {**_decision("defer", rationale), "actor": actor, "defer_until": until}
        history.record(
            ToolEvent(type=DEFERRED, run_id=run_id, workflow_id=record.get("workflow_id"), input=decision)
        )
        return {
            "action": "defer",
            "run_id": run_id,
            "actor": actor,
            "status": "deferred",
            "defer_until": until,
            "can_resume": True,  # EchoAI said False, yet offered no way back; here a decision resumes it
        }

    def get_status(self, run_id: str) -> dict[str, Any]:
        """EchoAI's status shape from the run history (`defer_until` while a deferral holds)."""
        record = self.layer.history.run(run_id) or {}
        status = record.get("status")
        request = self._request(run_id) if status == "interrupted" else {}
        deferral = self._deferral(run_id) if status == "interrupted" else None
        state = "waiting_for_human" if status == "interrupted" else (status or "unknown")
        answer = {
            "run_id": run_id,
            "run_status": status,  # the run history's word (docs/runs.md), whatever EchoAI's state says
            "state": "deferred" if deferral is not None else state,
            "blocked_at": request.get("node_id"),
            "allowed_actions": ["approve", "reject", "modify", "defer"],
            "has_pending_review": status == "interrupted" and deferral is None,
        }
        if deferral is not None:
            answer["defer_until"] = deferral.get("defer_until")
        if request.get("type") == "tool_approval":  # a tool call waits: which one, and who asked
            answer["blocked_at"] = request.get("agent_name") or request.get("tool")
            answer["tool_approval"] = request
        return answer

    # -- runs waiting for a tool call's approval (`echo_tools.governance`) -------------------------

    def _tool_approvals(self, run_id: str) -> list[Mapping[str, Any]]:
        """The `tool_approval` requests run `run_id` is paused at (none: not paused at one)."""
        try:
            answer = runner.run_status(run_id, storage=self.layer.history)
        except runner.RunResumeError:
            return []  # unknown: the resume names it
        if answer["status"] != "interrupted":
            return []
        requests = answer["state"].get("__interrupt__") or []
        return [r for r in requests if isinstance(r, Mapping) and r.get("type") == "tool_approval"]

    def _decide_approvals(
        self,
        run_id: str,
        waiting: list[Mapping[str, Any]],
        action: str,
        decision: dict[str, Any],
        actor: str,
        changes: Any,
    ) -> dict[str, Any]:
        """Decide every approval the run waits for, as `/tools/approvals/{id}` does (the `approve` action,
        the owner or an admin, exactly once), and answer the decision the run is resumed with (the
        arguments of an edit stay in the store, where the paused call reads them)."""
        principal = acting()
        ids = ", ".join(str(r.get("approval_id")) for r in waiting)
        if not principal.may("approve"):
            raise HitlRequestError(
                f"principal {principal.name!r} may not decide tool approvals (action 'approve' is not in its "
                f"grants); run {run_id!r} waits for approval {ids}",
                field="action",
                value="approve",
            )
        kind = {"approve": "approve", "reject": "reject", "modify": "edit"}[action]
        args = _edit_args(changes) if kind == "edit" else None
        for request in waiting:
            approval_id = str(request.get("approval_id"))
            try:
                off_the_loop(partial(self._decide_one, approval_id, kind, args, decision, actor, principal))
            except ApprovalDecisionError as exc:
                raise HitlRequestError(
                    f"{exc}; run {run_id!r} stays paused", field=exc.field or "approval_id", value=approval_id
                ) from exc
        resumed = {"decision": "reject" if kind == "reject" else "approve"}
        return {**resumed, **({"comment": decision["comment"]} if decision.get("comment") else {})}

    def _decide_one(
        self, approval_id: str, kind: str, args: Any, decision: dict[str, Any], actor: str, principal: Any
    ) -> None:
        """`executor.decide` of one approval; one already decided the same way (the run's carry-on
        failed after the decision) is carried on as it stands."""
        executor = self.layer.executor
        record = executor.governance.approvals.get(approval_id)
        admin = principal.grants.admin
        if record is not None and (admin or record.owner == principal.name) and record.status != "pending":
            same = ("rejected",) if kind == "reject" else ("approved", "done")
            if kind != "edit" and record.status in same:
                return  # decided the same way before: carry the run on (the call is claimed once)
        executor.decide(
            approval_id,
            kind,
            args=args,
            comment=decision.get("comment"),
            by=actor if actor and actor != "unknown" else principal.name,
            principal=principal.name,
            admin=admin,
        )

    def _deferral(self, run_id: str) -> dict[str, Any] | None:
        """The deferral holding the paused run back: the latest HITL mark is a deferral whose time (if
        any) has not passed; a resume or a new pause after it ends it."""
        last = None
        for event in self.layer.history.run_events(run_id):  # a read waits for what was recorded
            if event.type in _HITL_MARKS:
                last = event
        if last is None or last.type != DEFERRED:
            return None
        deferral = dict(last.input or {})
        until = deferral.get("defer_until")
        if until and datetime.fromisoformat(str(until)) <= datetime.now(UTC):
            return None  # the time to revisit has come: pending again
        return deferral

    def get_context(self, run_id: str) -> _Context | None:
        """The paused node's request and the state it paused with (None: no paused run)."""
        try:
            answer = runner.run_status(run_id, storage=self.layer.history)
        except runner.RunResumeError:
            return None
        if answer["status"] != "interrupted":
            return None
        state = dict(answer["state"])
        requests = state.pop("__interrupt__", [])
        request = requests[0] if requests else {}
        return _Context(
            {
                "workflow_id": state.get("workflow_id"),
                "run_id": run_id,
                "blocked_at": request.get("node_id") if isinstance(request, Mapping) else None,
                "agent_output": state.get("crew_result"),
                "request": request,
                "state_snapshot": {k: v for k, v in state.items() if k != "messages"},
            }
        )

    def get_decisions(self, run_id: str) -> list[_Context]:
        """The decisions the run was resumed with, and its deferrals, oldest first."""
        events = self.layer.history.run_events(run_id)
        return [
            _Context({"run_id": run_id, **dict(e.input or {})})
            for e in events
            if e.type in ("run.resumed", DEFERRED)
        ]

    def list_pending_reviews(self) -> list[dict[str, Any]]:
        """The recorded runs paused at a HITL node."""
        history = self.layer.history
        return [
            {"run_id": r.run_id, "workflow_id": r.workflow_id, "created_at": r.started}
            for r in history.runs(limit=500)
            if (history.run(r.run_id) or {}).get("status") == "interrupted"
            and self._deferral(r.run_id) is None
        ]

    def _request(self, run_id: str) -> dict[str, Any]:
        context = self.get_context(run_id)
        request = context.data.get("request") if context else None
        return dict(request) if isinstance(request, Mapping) else {}


class _Context:
    """A dict with EchoAI's `to_dict()` (its routes call it on contexts and decisions)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


def _instant(value: datetime | str | None) -> str | None:
    """`defer_until` as an ISO time in UTC (a time without a zone is taken as UTC); None stays None."""
    if value is None or value == "":
        return None
    try:
        when = (
            value
            if isinstance(value, datetime)
            else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        )
    except ValueError as exc:
        raise HitlRequestError(
            f"defer_until must be an ISO 8601 time such as '2026-01-20T10:00:00Z', got {value!r}",
            field="defer_until",
            value=value,
        ) from exc
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat()


def _edit_args(changes: Any) -> Any:
    """The new arguments of a tool call in EchoAI's `changes`: `changes.args` when it is an object, else
    `changes` itself (anything else is passed on: `decide` answers 422 naming `args`)."""
    if isinstance(changes, Mapping) and isinstance(changes.get("args"), Mapping):
        return dict(changes["args"])
    return dict(changes) if isinstance(changes, Mapping) else changes


def _decision(kind: str, rationale: str | None) -> dict[str, Any]:
    decision: dict[str, Any] = {"decision": kind}
    if rationale:
        decision["comment"] = rationale
    return decision
