"""`/tools/approvals`: the calls waiting for a person, and their decisions.

`GET /tools/approvals` lists pending approvals (oldest first); `GET /tools/approvals/{id}` shows one;
`POST /tools/approvals/{id}` with `{"decision": "approve" | "reject" | "edit", "args": {...},
"comment": "..."}` decides it. An approved call made outside a graph runs then, exactly once (its result is
in the answer); an approval of a paused recorded workflow run is decided, then the run is carried on in
the same request, as `POST /workflows/runs/{run_id}/resume` does (`run` in the answer: its id, status and
state, or the resume's `error`). Errors follow the API's contract: an unknown approval is 404,
an approval already decided 409, a bad decision or edit arguments that do not validate 422 naming the
field (the approval stays pending).
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Body, Query
from fastapi import Path as PathParam

from echo_tools.api.errors import ApiError
from echo_tools.gate import Principal
from echo_tools.governance.approvals import ApprovalDecisionError
from echo_tools.suggest import did_you_mean

_KINDS = {404: "not_found", 409: "conflict", 422: "validation"}


def add_approval_routes(router: APIRouter, state: Any) -> None:
    """Add the approval routes to the `/tools` router; each needs the `approve` action. A principal that
    is not admin sees and decides only the approvals of its own calls (another's is 404, as unknown)."""
    executor = state.executor
    approve = state.gate.requires("approve")

    @router.get("/approvals", summary="Calls waiting for a person's approval")
    async def list_approvals(
        limit: int = Query(100, ge=1, le=1000), principal: Principal = approve
    ) -> dict[str, Any]:
        store = executor.governance.approvals
        # filtered before the limit: another principal's thousand pending approvals never hide this one's
        every = principal.grants.admin
        pending = await anyio.to_thread.run_sync(
            lambda: store.pending(limit, owner=principal.name, every_owner=every)
        )
        return {"approvals": [r.to_dict() for r in pending]}

    @router.get("/approvals/{approval_id}", summary="One approval")
    async def show_approval(
        approval_id: str = PathParam(..., max_length=100), principal: Principal = approve
    ) -> dict[str, Any]:
        record = await anyio.to_thread.run_sync(lambda: executor.governance.approvals.get(approval_id))
        if record is None or not _sees(principal, record.owner):
            raise ApiError(404, "not_found", f"no approval has id {approval_id!r}", field="approval_id")
        return record.to_dict()

    @router.post("/approvals/{approval_id}", summary="Approve, reject or edit a call")
    async def decide_approval(
        approval_id: str = PathParam(..., max_length=100),
        body: dict[str, Any] = Body(...),
        principal: Principal = approve,
    ) -> dict[str, Any]:
        decision, args, comment = _decision(body)
        try:
            record, result = await anyio.to_thread.run_sync(
                lambda: executor.decide(
                    approval_id,
                    decision,
                    args=args,
                    comment=comment,
                    by=principal.name,
                    principal=principal.name,
                    admin=principal.grants.admin,
                    principals=state.gate.principal_named,  # the call runs with its asker's scope as now
                )
            )
        except ApprovalDecisionError as exc:
            raise ApiError(
                exc.status, _KINDS.get(exc.status, "validation"), str(exc), field=exc.field
            ) from exc
        answer: dict[str, Any] = {"approval": record.to_dict(), "result": None, "run": None}
        if result is not None:
            answer["result"] = result.model_dump(mode="json")
        elif record.kind == "run" and record.run_id and state.run_resumer is not None:
            resume = {
                "decision": "reject" if record.status == "rejected" else "approve"
            }  # args: in the store
            if comment is not None:
                resume["comment"] = comment
            answer["run"] = await state.run_resumer(record.run_id, resume, principal)
        return answer


def _sees(principal: Principal, owner: str | None) -> bool:
    """Whether `principal` may see and decide an approval asked by `owner` (None: the operator)."""
    return principal.grants.admin or owner == principal.name


def _decision(body: Any) -> tuple[str, dict[str, Any] | None, str | None]:
    if not isinstance(body, dict):
        raise ApiError(422, "validation", "the body must be a JSON object with 'decision'", field="decision")
    unknown = sorted(set(body) - {"decision", "args", "edits", "comment"})
    if unknown:
        hint = did_you_mean(unknown[0], ("decision", "args", "edits", "comment"))
        raise ApiError(
            422, "validation", f"unknown field {unknown[0]!r} in a decision;{hint} it takes decision, args, "
            "comment", field=unknown[0],
        )  # fmt: skip
    decision = body.get("decision")
    if not isinstance(decision, str):
        raise ApiError(
            422,
            "validation",
            f"decision must be 'approve', 'reject' or 'edit', got {decision!r:.80}",
            field="decision",
        )
    args = body.get("args", body.get("edits"))
    if args is not None and not isinstance(args, dict):
        raise ApiError(422, "validation", f"args must be a JSON object, got {args!r:.80}", field="args")
    comment = body.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise ApiError(422, "validation", f"comment must be a string, got {comment!r:.80}", field="comment")
    return decision, args, comment
