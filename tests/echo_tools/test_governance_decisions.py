"""A service asks for an approval and waits for the decision; a person decides from another process (which
may not even have the tool); the service runs the call, once, with the scope of the call that asked.
Also: a tampered or foreign kept scope runs nothing, expired and crowded approvals."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from echo_tools import ToolContext, ToolExecutor, ToolRegistry
from echo_tools.gate import Budget, BudgetMeter, Grants, Principal
from echo_tools.governance.approvals import MAX_PENDING, SqliteApprovalStore

RAN: list[dict[str, Any]] = []


def ship(order: str) -> dict[str, Any]:
    """Ship an order (a tool with an external side effect)."""
    RAN.append({"order": order})
    return {"shipped": order}


def _service(tmp_path: Path) -> tuple[ToolRegistry, ToolExecutor]:
    """The asking service: an in-process tool (no other process has it) and approvals beside its history."""
    RAN.clear()
    registry = ToolRegistry(storage_dir=tmp_path / "store")
    registry.add(ship, approval="always")
    executor = ToolExecutor(registry, approvals=SqliteApprovalStore(tmp_path / "store"))
    return registry, executor


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "echo_tools.cli", "--storage", str(tmp_path / "store"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow  # a second process
async def test_a_service_waits_for_a_decision_taken_in_another_process_and_runs_the_call_once(
    tmp_path: Path,
) -> None:
    _, executor = _service(tmp_path)
    asked = await executor.invoke("ship", {"order": "A-1"}, ToolContext(principal="shop", user_id="u7"))
    assert asked.error_type == "approval_required"
    approval_id = asked.metadata["approval_id"]
    assert RAN == []

    approver = await asyncio.to_thread(_cli, tmp_path, "approvals", "approve", approval_id)
    # the approver's process has no tool `ship`: the decision is kept, the call is not consumed there
    assert approver.returncode == 0, approver.stderr
    assert f"approval {approval_id} approved" in approver.stdout
    assert "did not run here" in approver.stdout and "'tool_ship'" in approver.stdout
    assert RAN == []

    result = await executor.wait_for_decision(approval_id, timeout_s=60)
    assert result.success and result.output == {"shipped": "A-1"}, result
    again = await executor.wait_for_decision(approval_id, timeout_s=1)
    assert again.output == {"shipped": "A-1"} and again.metadata.get("ran_before") is True
    assert RAN == [{"order": "A-1"}]  # once
    record = executor.governance.approvals.get(approval_id)
    assert record is not None and (record.status, record.decided_by) == ("done", "cli")
    await executor.aclose()


async def test_waiting_for_a_decision_that_never_comes_says_it_is_pending(tmp_path: Path) -> None:
    _, executor = _service(tmp_path)
    asked = await executor.invoke("ship", {"order": "A-2"})
    result = await executor.wait_for_decision(asked.metadata["approval_id"], timeout_s=0.2, poll_s=0.05)
    assert result.error_type == "approval_required" and "still pending" in (result.error or "")
    assert RAN == []
    await executor.aclose()


async def test_a_rejection_decided_elsewhere_reaches_the_waiting_service(tmp_path: Path) -> None:
    _, executor = _service(tmp_path)
    asked = await executor.invoke("ship", {"order": "A-3"})
    other = ToolExecutor(
        ToolRegistry(storage_dir=tmp_path / "other"), approvals=SqliteApprovalStore(tmp_path / "store")
    )
    await asyncio.to_thread(other.decide, asked.metadata["approval_id"], "reject", comment="not today")
    result = await executor.wait_for_decision(asked.metadata["approval_id"], timeout_s=10)
    assert result.error_type == "rejected" and "not today" in (result.error or "")
    assert RAN == []
    await other.aclose()
    await executor.aclose()


def test_a_tampered_kept_scope_voids_the_approval_and_runs_nothing(tmp_path: Path) -> None:
    _, executor = _service(tmp_path)
    context = ToolContext(principal="shop", granted_permissions=[], budget=BudgetMeter(Budget(max_calls=2)))
    asked = executor.invoke_sync("ship", {"order": "A-4"}, context)
    approval_id = asked.metadata["approval_id"]
    with sqlite3.connect(tmp_path / "store" / "runs.sqlite") as db:  # the attack: widen the kept ceiling
        (text,) = db.execute(
            "SELECT record FROM echo_approvals WHERE approval_id = ?", (approval_id,)
        ).fetchone()
        record = json.loads(text)
        record["scope"]["ceiling"] = None
        record["scope"]["meter"]["budget"]["max_calls"] = 10_000
        db.execute(
            "UPDATE echo_approvals SET record = ? WHERE approval_id = ?", (json.dumps(record), approval_id)
        )
    decided, result = executor.decide(approval_id, "approve")
    assert result is not None and not result.success
    assert result.error_field == "scope.seal" and "changed since it was kept" in (result.error or "")
    assert decided.status == "void" and RAN == []
    executor.close()


def test_an_approval_of_a_principal_that_is_gone_runs_nothing(tmp_path: Path) -> None:
    _, executor = _service(tmp_path)
    asked = executor.invoke_sync("ship", {"order": "A-5"}, ToolContext(principal="intern"))
    known = {"admin": Principal("admin", Grants(admin=True))}
    decided, result = executor.decide(asked.metadata["approval_id"], "approve", principals=known.get)
    assert result is not None and result.error_field == "scope.principal"
    assert "'intern'" in (result.error or "") and "no longer exists" in (result.error or "")
    assert decided.status == "void" and RAN == []
    executor.close()


def test_an_approved_call_runs_with_the_narrower_of_the_kept_and_the_current_ceiling(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path / "store")
    registry.add(ship, approval="always", permissions=["net:outbound"])
    executor = ToolExecutor(registry)
    RAN.clear()
    asked = executor.invoke_sync(
        "ship", {"order": "A-6"}, ToolContext(principal="shop", granted_permissions=["net:outbound"])
    )
    # since it asked, the principal lost net:outbound
    now = {"shop": Principal("shop", Grants(permissions=[]))}
    _, result = executor.decide(asked.metadata["approval_id"], "approve", principals=now.get)
    assert result is not None and result.error_type == "permission_denied", result
    assert RAN == []
    executor.close()


def test_a_pending_approval_expires_and_cannot_be_approved(tmp_path: Path) -> None:
    from echo_tools.governance.approvals import ApprovalDecisionError

    registry = ToolRegistry(storage_dir=tmp_path / "store")
    registry.add(ship, approval="always", approval_ttl_s=0.001)
    executor = ToolExecutor(registry, approvals=SqliteApprovalStore(tmp_path / "store"))
    RAN.clear()
    approval_id = executor.invoke_sync("ship", {"order": "A-7"}).metadata["approval_id"]
    record = executor.governance.approvals.get(approval_id)
    while record is not None and record.status == "pending":  # the next clock tick past its expiry
        record = executor.governance.approvals.get(approval_id)
    assert record is not None and record.status == "expired"
    assert record.to_dict()["status"] == "expired"
    assert approval_id not in [r.approval_id for r in executor.governance.approvals.pending()]
    with pytest.raises(ApprovalDecisionError) as refused:
        executor.decide(approval_id, "approve")
    assert refused.value.status == 409 and "expired" in str(refused.value)
    assert RAN == []
    executor.close()


def test_one_principal_cannot_bury_another_s_approvals(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path / "store")
    registry.add(ship, approval="always")
    store = SqliteApprovalStore(tmp_path / "store")
    executor = ToolExecutor(registry, approvals=store)
    for n in range(MAX_PENDING):
        assert executor.invoke_sync(
            "ship", {"order": f"M-{n}"}, ToolContext(principal="mallory")
        ).error_type == ("approval_required")
    over = executor.invoke_sync("ship", {"order": "M-over"}, ToolContext(principal="mallory"))
    assert over.error_type == "quota" and f"{MAX_PENDING} approvals pending" in (over.error or "")
    alice = executor.invoke_sync("ship", {"order": "A-8"}, ToolContext(principal="alice"))
    mine = store.pending(10, owner="alice", every_owner=False)
    assert [r.approval_id for r in mine] == [alice.metadata["approval_id"]]  # filtered before the limit
    assert len(store.pending(10)) == 10
    executor.close()
