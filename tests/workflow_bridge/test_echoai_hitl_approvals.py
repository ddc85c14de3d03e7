"""EchoAI's HITL routes deciding a run paused at a tool call that needs approval (`tool_approval`):
approve, reject and modify go through the approval store first (the `approve` action, the approval's
owner or an admin, decided exactly once), then carry the run on; the tool runs once, with edited
arguments when `modify` gave them."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from echo_tools.gate import Grants, Principal, acting_as
from tests.echo_tools.test_governance_approvals import LINE_SCHEMA, SIDE
from tests.workflow_bridge._compiler_support import agent, chain
from tests.workflow_bridge.test_dropin_echoai_host import AgentRegistry, Container, HostExecutor
from workflow_bridge import echoai

FIXTURES = "tests.echo_tools.fixture_tools"


def _paused(tmp_path: Path) -> tuple[Any, str, Path]:
    """EchoAI's services answered by echo-tools, and a run of an agent whose tool needs approval, paused."""
    out = tmp_path / "out.txt"
    task = json.dumps({"path": str(out), "line": "approved line"})
    wf, agents = chain(
        agent("scribe", name="Scribe", tools=["tool_write"], prompt=f"Write: {task}"),
        agent("end", "End", output_schema=["result"]),
        workflow_id="wf_approval",
    )
    container = Container()
    store = tmp_path / "tools"
    registry = AgentRegistry(dict(agents), tmp_path)
    container.register("workflow.executor", lambda: HostExecutor({("wf_approval", "test"): wf}, registry))
    layer = echoai.install(container, storage_dir=store, allowed_modules=["AgentTools", FIXTURES])
    layer.registry.register(
        {
            "name": "Write",
            "description": "Append a line to a file.",
            "tool_type": "local",
            "input_schema": LINE_SCHEMA,
            "execution_config": {"module": SIDE, "function": "append_line"},
            "approval": "always",
        }
    )
    answer = container.resolve("workflow.executor").execute_workflow("wf_approval", "test", None, {})
    assert answer["status"] == "interrupted", answer
    assert answer["hitl"]["type"] == "tool_approval" and not out.exists()
    return layer, answer["run_id"], out


def echoai_routes(hitl: Any) -> TestClient:
    """EchoAI's `/workflows/hitl/*` decision routes as it writes them (a ValueError answered with 400)."""
    app = FastAPI()

    def answer(call: Any) -> Any:
        try:
            return call()
        except ValueError as exc:
            raise HTTPException(status_code=400, detail=str(exc)) from exc

    @app.post("/workflows/hitl/approve")
    async def approve(request: dict) -> Any:
        return answer(
            lambda: hitl.approve(request["run_id"], request.get("actor", "unknown"), request.get("rationale"))
        )

    @app.post("/workflows/hitl/reject")
    async def reject(request: dict) -> Any:
        return answer(
            lambda: hitl.reject(request["run_id"], request.get("actor", "unknown"), request.get("rationale"))
        )

    @app.post("/workflows/hitl/modify")
    async def modify(request: dict) -> Any:
        return answer(
            lambda: hitl.modify(
                request["run_id"],
                request.get("actor", "unknown"),
                request.get("changes", {}),
                request.get("rationale"),
            )
        )

    @app.get("/workflows/hitl/status/{run_id}")
    async def status(run_id: str) -> Any:
        return hitl.get_status(run_id)

    return TestClient(app)


def _approval(layer: Any) -> Any:
    (pending,) = layer.executor.governance.approvals.pending()
    return pending


def test_echoais_approve_route_decides_the_tool_approval_once_and_carries_the_run_on(tmp_path: Path) -> None:
    layer, run_id, out = _paused(tmp_path)
    routes = echoai_routes(layer.hitl_manager())
    status = routes.get(f"/workflows/hitl/status/{run_id}").json()
    pending = _approval(layer)
    assert status["state"] == "waiting_for_human" and status["blocked_at"] == "Scribe"
    assert status["tool_approval"]["approval_id"] == pending.approval_id

    done = routes.post("/workflows/hitl/approve", json={"run_id": run_id, "actor": "lead", "rationale": "ok"})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "approved" and done.json()["run_status"] == "completed"
    assert out.read_text().splitlines() == ["approved line"]  # the tool ran, once
    record = layer.executor.governance.approvals.get(pending.approval_id)
    assert record.status == "done" and record.decided_by == "lead" and record.comment == "ok"

    again = routes.post("/workflows/hitl/approve", json={"run_id": run_id, "actor": "lead"})
    assert again.status_code == 400 and "interrupted" in again.json()["detail"]
    assert out.read_text().splitlines() == ["approved line"]
    layer.executor.close()


def test_two_approvals_at_once_run_the_tool_once(tmp_path: Path) -> None:
    layer, run_id, out = _paused(tmp_path)
    hitl = layer.hitl_manager()
    outcomes: list[str] = []

    def approve() -> None:
        try:
            hitl.approve(run_id, "lead")
            outcomes.append("approved")
        except ValueError as exc:
            outcomes.append(f"refused: {exc}")

    threads = [threading.Thread(target=approve) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(o.split(":")[0] for o in outcomes) == ["approved", "refused"], outcomes
    assert out.read_text().splitlines() == ["approved line"]
    layer.executor.close()


def test_a_principal_without_the_approve_action_or_not_the_owner_is_refused_and_the_run_stays_paused(
    tmp_path: Path,
) -> None:
    layer, run_id, out = _paused(tmp_path)
    hitl = layer.hitl_manager()
    runner_only = Principal("bob", Grants(actions={"run"}))
    with acting_as(runner_only):
        refused = echoai_routes(hitl).post("/workflows/hitl/approve", json={"run_id": run_id})
    assert refused.status_code == 400
    assert "'bob'" in refused.json()["detail"] and "'approve'" in refused.json()["detail"]
    other = Principal("carol", Grants(actions={"run", "approve"}))  # may approve, but not the operator's
    with acting_as(other):
        foreign = echoai_routes(hitl).post("/workflows/hitl/approve", json={"run_id": run_id})
    assert foreign.status_code == 400 and "no approval has id" in foreign.json()["detail"]
    assert _approval(layer).status == "pending" and not out.exists()
    assert layer.history.run(run_id)["status"] == "interrupted"
    layer.executor.close()


def test_modify_edits_the_calls_arguments_validated_and_reject_skips_the_call(tmp_path: Path) -> None:
    layer, run_id, out = _paused(tmp_path)
    routes = echoai_routes(layer.hitl_manager())
    too_long = {"run_id": run_id, "changes": {"path": str(out), "line": "x" * 30}}
    bad = routes.post("/workflows/hitl/modify", json=too_long)
    assert bad.status_code == 400 and "line" in bad.json()["detail"]
    assert _approval(layer).status == "pending" and not out.exists()  # still pending, nothing ran

    edit = {"run_id": run_id, "actor": "lead", "changes": {"args": {"path": str(out), "line": "edited line"}}}
    done = routes.post("/workflows/hitl/modify", json=edit)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "modified" and done.json()["run_status"] == "completed"
    assert out.read_text().splitlines() == ["edited line"]
    layer.executor.close()

    layer2, run2, out2 = _paused(tmp_path / "second")
    asked = _approval(layer2).approval_id
    rejected = echoai_routes(layer2.hitl_manager()).post(
        "/workflows/hitl/reject", json={"run_id": run2, "rationale": "not now"}
    )
    assert rejected.status_code == 200, rejected.text
    assert rejected.json()["run_status"] == "completed" and not out2.exists()
    record = layer2.executor.governance.approvals.get(asked)
    assert record is not None and record.status == "rejected" and record.comment == "not now"
    layer2.executor.close()
