"""The decisions a paused run takes: a reviewer's decision at a HITL node (`check_decision`, checked against
what the node allows) or a person's answer to an MCP server's question (`check_answer`); and
`RunResumeError`, what a run that cannot be resumed raises (with the HTTP status the API answers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

HITL_DECISIONS = ("approve", "reject", "edit")


class RunResumeError(ValueError):
    """A run that cannot be resumed: `status` is the HTTP status the API answers (404 unknown run, 409 not
    paused, 422 a decision that does not fit the HITL node), `field` what the message names."""

    def __init__(self, message: str, *, status: int, field: str, run_id: str) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.run_id = run_id


def check_decision(decision: Any, run_id: str = "") -> dict[str, Any]:
    """A reviewer's decision in the form the HITL node takes, or `RunResumeError` (422) naming the field.

    `"approve"` / `"reject"` / `"edit"`, or `{"decision": ..., "edits": {...}, "comment": text}`; `edits`
    (an object) is what an `edit` puts in place of the paused node's `crew_result`.
    """
    if isinstance(decision, str):
        decision = {"decision": decision}
    if not isinstance(decision, Mapping):
        raise _unfit(
            f"decision must be 'approve', 'reject' or 'edit', got {decision!r:.80}",
            "decision",
            run_id,
        )
    kind = decision.get("decision")
    if kind not in ("approve", "reject", "edit"):
        raise _unfit(
            f"decision must be 'approve', 'reject' or 'edit', got {kind!r:.80}",
            "decision",
            run_id,
        )
    value = {k: v for k, v in decision.items() if k != "edits"}
    edits = decision.get("edits")
    if kind == "edit":
        if not isinstance(edits, Mapping):
            raise _unfit(
                f"edits must be an object for an 'edit' decision, got {edits!r:.80}",
                "edits",
                run_id,
            )
        # `crew_result` in the edits replaces the paused result as it is; other edits replace it whole
        value.setdefault("edited_output", edits["crew_result"] if "crew_result" in edits else dict(edits))
    elif edits is not None:
        raise _unfit(
            f"edits are only taken with an 'edit' decision, not with {kind!r}",
            "edits",
            run_id,
        )
    comment = value.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise _unfit(f"comment must be a string, got {comment!r:.80}", "comment", run_id)
    return value


def _unfit(message: str, field: str, run_id: str) -> RunResumeError:
    # a decision that does not fit the paused HITL node: the API answers 422
    return RunResumeError(message, status=422, field=field, run_id=run_id)


ELICITATION_ACTIONS = ("accept", "decline", "cancel")


def waiting_for(state: Mapping[str, Any], run_id: str) -> list[dict[str, Any]]:
    """What a paused run waits for, one entry per pause: `{"kind", "what", "how"}` plus the pause's own
    fields (a tool approval's `approval_id`, `tool`, `args`, `agent_name`; a HITL node's `node_id` and
    `title`; an MCP server's question): `what` says it in a sentence, `how` is the command that decides."""
    found = []
    for request in state.get("__interrupt__") or []:
        request = getattr(request, "value", request)
        if not isinstance(request, Mapping):
            continue
        kind = str(request.get("type") or "hitl")
        if kind == "tool_approval":
            agent = f" by agent {request.get('agent_name')!r}" if request.get("agent_name") else ""
            args = json.dumps(request.get("args"), ensure_ascii=False, default=str)[:300]
            what = f"approval {request.get('approval_id')} of a call of tool {request.get('tool')!r}{agent} with {args}"
            how = f"echo-tools approvals approve {request.get('approval_id')} (or reject, or --edit JSON)"
        elif kind == "mcp_elicitation":
            what = f"MCP server {request.get('server')!r} asks: {str(request.get('message') or '')[:300]}"
            how = f"echo-tools resume {run_id} --answer JSON (or decline, or cancel)"
        else:
            title = request.get("title") or request.get("node_id")
            what = f"a person's review at HITL node {title!r}"
            how = f"echo-tools resume {run_id} --approve | --reject | --edit JSON"
        found.append({**dict(request), "kind": kind, "what": what, "how": how})
    return found


def elicitation(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The MCP elicitation request a run is paused at (the interrupt of `echo_tools.mcp.callbacks`), if any."""
    for request in state.get("__interrupt__") or []:
        if isinstance(request, Mapping) and request.get("type") == "mcp_elicitation":
            return dict(request)
    return None


def check_answer(answer: Any, request: Mapping[str, Any], run_id: str = "") -> dict[str, Any]:
    """A person's answer to an MCP server's elicitation request, or `RunResumeError` (422) naming the field.

    `{"decision": "accept", "content": {...}}` (also `"action"` for `"decision"`), `"decline"` or
    `"cancel"`; the server's schema checks `content` when the answer reaches it.
    """
    server = request.get("server")
    if isinstance(answer, str):
        answer = {"decision": answer}
    if not isinstance(answer, Mapping):
        raise _unfit(
            f"run {run_id!r} is paused at MCP server {server!r}'s question; the answer must be an object "
            f"with 'decision', got {answer!r:.80}",
            "decision",
            run_id,
        )
    action = answer.get("decision", answer.get("action"))
    if action not in ELICITATION_ACTIONS:
        raise _unfit(
            f"run {run_id!r} is paused at MCP server {server!r}'s question; decision must be "
            f"{', '.join(map(repr, ELICITATION_ACTIONS))}, got {action!r:.80}",
            "decision",
            run_id,
        )
    content = answer.get("content")
    if action == "accept" and not isinstance(content, Mapping):
        raise _unfit(
            f"content must be an object answering MCP server {server!r}'s question, got {content!r:.80}",
            "content",
            run_id,
        )
    answered = dict(content) if action == "accept" and isinstance(content, Mapping) else None
    return {"decision": action, "action": action, "content": answered}


def check_allowed(kind: str, state: Mapping[str, Any], run_id: str) -> None:
    # the paused node says which decisions it takes (the canvas's allowedDecisions, allowEdit)
    for request in state.get("__interrupt__") or []:
        if not isinstance(request, Mapping):
            continue
        # a canvas may label its own decisions ("publish", "revise"): only the ones the node knows count
        allowed = [d for d in request.get("decisions") or () if d in HITL_DECISIONS] or list(HITL_DECISIONS)
        if kind == "edit" and request.get("allow_edit") is False:
            allowed = [d for d in allowed if d != "edit"]
        if kind not in allowed:
            raise _unfit(
                f"decision {kind!r} is not one the HITL node {request.get('node_id')!r} of run {run_id!r} "
                f"takes; it takes {', '.join(allowed)}",
                "decision",
                run_id,
            )
