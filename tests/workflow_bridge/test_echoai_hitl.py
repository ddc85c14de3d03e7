"""EchoAI's `/hitl/defer` and `/hitl/modify` through the replaced HITL manager (`echoai_hitl.EchoAIHitl`).

EchoAI's own manager defers by marking the paused run `deferred` (off the pending list, with a time to
revisit) and recording the decision; its `modify` means an edit of the agent's configuration (`llm`,
`prompt`). Here a deferral is kept in the run history and a later decision still resumes the run; an
agent-config `modify` is refused with a 400 naming the field instead of being taken as the edited result.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from tests.workflow_bridge.test_dropin_echoai_host import _echoai, _pause
from workflow_bridge.echoai_hitl import HitlRequestError


def echoai_routes(hitl: Any) -> TestClient:
    """EchoAI's `/workflows/hitl/modify` and `/hitl/defer` as it writes them (`async def`, the body's fields
    passed on, a ValueError answered with 400 and its message as `detail`)."""
    app = FastAPI()

    @app.post("/workflows/hitl/modify")
    async def modify(request: dict) -> Any:
        try:
            return hitl.modify(
                run_id=request["run_id"],
                actor=request.get("actor", "unknown"),
                changes=request.get("changes", {}),
                rationale=request.get("rationale"),
            )
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    @app.post("/workflows/hitl/defer")
    async def defer(request: dict) -> Any:
        until = request.get("defer_until")
        try:
            return hitl.defer(
                run_id=request["run_id"],
                actor=request.get("actor", "unknown"),
                defer_until=datetime.fromisoformat(until.replace("Z", "+00:00")) if until else None,
                rationale=request.get("rationale"),
            )
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    return TestClient(app)


def test_defer_keeps_the_run_paused_marked_deferred_off_the_pending_list(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    body = {
        "run_id": run_id,
        "actor": "lead",
        "defer_until": "2999-01-20T10:00:00Z",
        "rationale": "team call",
    }
    answer = echoai_routes(hitl).post("/workflows/hitl/defer", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "action": "defer",
        "run_id": run_id,
        "actor": "lead",
        "status": "deferred",
        "defer_until": "2999-01-20T10:00:00+00:00",
        "can_resume": True,
    }
    status = hitl.get_status(run_id)
    assert status["state"] == "deferred" and status["has_pending_review"] is False
    assert status["defer_until"] == "2999-01-20T10:00:00+00:00" and status["blocked_at"] == "gate"
    assert hitl.list_pending_reviews() == []
    assert layer.history.run(run_id)["status"] == "interrupted"  # still paused, resumable
    (decision,) = [d.to_dict() for d in hitl.get_decisions(run_id)]
    assert decision["decision"] == "defer" and decision["actor"] == "lead"
    assert decision["comment"] == "team call"


def test_a_decision_after_a_deferral_resumes_the_run(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    hitl.defer(run_id=run_id, actor="lead")
    assert hitl.get_status(run_id)["state"] == "deferred"
    answer = hitl.approve(run_id=run_id, actor="lead", rationale="agreed")
    assert answer["status"] == "approved" and answer["run_status"] == "completed"
    decisions = [d.to_dict() for d in hitl.get_decisions(run_id)]
    assert [(d["decision"], d["actor"]) for d in decisions] == [("defer", "lead"), ("approve", "lead")]
    assert hitl.get_status(run_id)["state"] == "completed"


def test_a_deferral_whose_time_has_passed_is_pending_again(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    hitl.defer(run_id=run_id, actor="lead", defer_until=datetime.now(UTC) - timedelta(minutes=1))
    assert hitl.get_status(run_id)["state"] == "waiting_for_human"
    assert [p["run_id"] for p in hitl.list_pending_reviews()] == [run_id]


def test_defer_of_a_run_that_is_not_paused_or_unknown_is_a_400_naming_it(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    hitl.approve(run_id=run_id, actor="lead")
    routes = echoai_routes(hitl)
    answer = routes.post("/workflows/hitl/defer", json={"run_id": run_id})
    assert answer.status_code == 400
    assert f"run {run_id!r} is 'completed', not 'interrupted'" in answer.json()["detail"]
    answer = routes.post("/workflows/hitl/defer", json={"run_id": "run_nope"})
    assert answer.status_code == 400 and "run_id 'run_nope'" in answer.json()["detail"]
    with pytest.raises(HitlRequestError) as caught:
        hitl.defer(run_id="run_nope")
    assert caught.value.field == "run_id" and caught.value.value == "run_nope"


def test_defer_until_that_is_not_a_time_is_refused_naming_it(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    with pytest.raises(HitlRequestError, match="defer_until must be an ISO 8601 time") as caught:
        hitl.defer(run_id=run_id, defer_until="next tuesday")
    assert caught.value.field == "defer_until" and "'next tuesday'" in str(caught.value)
    assert hitl.get_status(run_id)["state"] == "waiting_for_human"  # nothing recorded
    assert hitl.get_decisions(run_id) == []


@pytest.mark.parametrize(
    ("changes", "field", "value"),
    [
        ({"agent_id": "gate", "llm": {"temperature": 0.5}, "prompt": "Updated prompt"}, "agent_id", "'gate'"),
        ({"llm": {"temperature": 0.5}}, "llm", "{'temperature': 0.5}"),
        ({"prompt": "Be bolder"}, "prompt", "'Be bolder'"),
    ],
)
def test_an_agent_config_modify_is_a_400_naming_the_field_and_the_run_stays_paused(
    tmp_path: Path, changes: dict, field: str, value: str
) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    body = {"run_id": run_id, "actor": "me", "changes": changes}
    answer = echoai_routes(hitl).post("/workflows/hitl/modify", json=body)
    assert answer.status_code == 400
    detail = answer.json()["detail"]
    assert f"changes.{field} is an agent-config change ({field}={value})" in detail
    assert "changes.edited_output" in detail  # what to send instead
    with pytest.raises(HitlRequestError) as caught:
        hitl.modify(run_id=run_id, actor="me", changes=changes)
    assert caught.value.field == f"changes.{field}"
    assert layer.history.run(run_id)["status"] == "interrupted"  # the refused change took nothing
    assert hitl.get_decisions(run_id) == []


def test_a_result_modify_still_edits_the_paused_result(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    body = {"run_id": run_id, "actor": "me", "changes": {"edited_output": "release 1.3"}}
    answer = echoai_routes(hitl).post("/workflows/hitl/modify", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "modified" and answer.json()["output"]["result"] == "release 1.3"
