"""Approvals outside a graph: a call that needs one is not run and answers approval_required with its id;
executor.decide approves (the call runs once), rejects, or edits (new args validated); bad decisions are
404/409/422 naming the approval or the field, and leave it pending."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from echo_tools import ToolContext
from echo_tools.governance import ApprovalDecisionError, SqliteApprovalStore, ToolCall

from ._executor_support import local_tool, make_executor

SIDE = "tests.echo_tools.fixture_tools.side_effects"
LINE_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "line": {"type": "string", "maxLength": 20}},
    "required": ["path", "line"],
}


def writer(name: str = "Write", **fields: object) -> dict[str, object]:
    fields.setdefault("approval", "always")
    return local_tool(name, "append_line", module=SIDE, input_schema=LINE_SCHEMA, **fields)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_a_call_needing_approval_is_not_run_and_names_its_pending_approval(tmp_path: Path) -> None:
    executor, log = make_executor(writer())
    out = tmp_path / "out.txt"
    result = executor.invoke_sync(
        "Write", {"path": str(out), "line": "hello"}, ToolContext(agent_name="Clerk")
    )
    assert result.success is False and result.error_type == "approval_required"
    approval_id = result.metadata["approval_id"]
    assert approval_id in (result.error or "")
    assert lines(out) == []
    assert [e.type for e in log.events] == ["tool.failed"]
    pending = executor.governance.approvals.pending()
    assert [p.approval_id for p in pending] == [approval_id]
    assert pending[0].to_dict()["agent_name"] == "Clerk"
    assert pending[0].args == {"path": str(out), "line": "hello"}


def test_approving_runs_the_call_exactly_once_and_returns_its_result(tmp_path: Path) -> None:
    executor, _ = make_executor(writer())
    out = tmp_path / "out.txt"
    approval_id = executor.invoke_sync("Write", {"path": str(out), "line": "a"}).metadata["approval_id"]
    record, result = executor.decide(approval_id, "approve", by="reviewer")
    assert result is not None and result.success and result.output == 1
    assert result.metadata["approval_id"] == approval_id
    assert record.status == "approved" and record.decided_by == "reviewer"
    assert lines(out) == ["a"]
    with pytest.raises(ApprovalDecisionError) as again:
        executor.decide(approval_id, "approve")
    assert again.value.status == 409 and approval_id in str(again.value)
    assert executor.governance.approvals.get(approval_id).status == "done"  # type: ignore[union-attr]
    assert lines(out) == ["a"]


def test_rejecting_never_runs_the_call(tmp_path: Path) -> None:
    executor, _ = make_executor(writer())
    out = tmp_path / "out.txt"
    approval_id = executor.invoke_sync("Write", {"path": str(out), "line": "a"}).metadata["approval_id"]
    record, result = executor.decide(approval_id, "reject", comment="not today")
    assert result is None and record.status == "rejected" and record.comment == "not today"
    assert lines(out) == []
    assert executor.governance.approvals.pending() == []


def test_an_edit_runs_the_call_with_the_new_arguments(tmp_path: Path) -> None:
    executor, _ = make_executor(writer())
    out = tmp_path / "out.txt"
    approval_id = executor.invoke_sync("Write", {"path": str(out), "line": "draft"}).metadata["approval_id"]
    _, result = executor.decide(approval_id, "edit", args={"path": str(out), "line": "final"})
    assert result is not None and result.success
    assert lines(out) == ["final"]


def test_an_edit_that_does_not_validate_is_422_naming_the_field_and_stays_pending(tmp_path: Path) -> None:
    executor, _ = make_executor(writer())
    out = tmp_path / "out.txt"
    approval_id = executor.invoke_sync("Write", {"path": str(out), "line": "a"}).metadata["approval_id"]
    with pytest.raises(ApprovalDecisionError) as bad:
        executor.decide(approval_id, "edit", args={"path": str(out), "line": "x" * 50})
    assert bad.value.status == 422 and bad.value.field == "input.line"
    assert "still pending" in str(bad.value)
    with pytest.raises(ApprovalDecisionError) as missing:
        executor.decide(approval_id, "edit")
    assert missing.value.status == 422 and missing.value.field == "args"
    assert executor.governance.approvals.get(approval_id).status == "pending"  # type: ignore[union-attr]
    assert lines(out) == []


def test_an_unknown_approval_or_decision_is_refused_naming_it() -> None:
    executor, _ = make_executor(writer())
    with pytest.raises(ApprovalDecisionError) as unknown:
        executor.decide("apr_nope", "approve")
    assert unknown.value.status == 404 and "apr_nope" in str(unknown.value)
    with pytest.raises(ApprovalDecisionError) as word:
        executor.decide("apr_nope", "maybe")
    assert word.value.status == 422 and word.value.field == "decision"


def test_external_approval_asks_only_for_tools_with_external_side_effects(tmp_path: Path) -> None:
    executor, _ = make_executor(
        writer("Ext", approval="external"), writer("Idem", approval="external", side_effect="idempotent")
    )
    out = tmp_path / "out.txt"
    assert executor.invoke_sync("Ext", {"path": str(out), "line": "a"}).error_type == "approval_required"
    assert executor.invoke_sync("Idem", {"path": str(out), "line": "b"}).success
    assert lines(out) == ["b"]


def test_an_approval_policy_decides_per_call(tmp_path: Path) -> None:
    def policy(call: ToolCall) -> bool | None:
        return True if call.args.get("line") == "risky" else None

    executor, _ = make_executor(writer(approval="never"), approval_policy=policy)
    out = tmp_path / "out.txt"
    assert executor.invoke_sync("Write", {"path": str(out), "line": "fine"}).success
    assert (
        executor.invoke_sync("Write", {"path": str(out), "line": "risky"}).error_type == "approval_required"
    )
    assert lines(out) == ["fine"]


def test_concurrent_decisions_of_one_approval_run_it_once(tmp_path: Path) -> None:
    store = SqliteApprovalStore(tmp_path / "runs.sqlite")
    first, _ = make_executor(writer(), approvals=store)
    second, _ = make_executor(writer(), approvals=SqliteApprovalStore(tmp_path / "runs.sqlite"))
    out = tmp_path / "out.txt"
    approval_id = first.invoke_sync("Write", {"path": str(out), "line": "once"}).metadata["approval_id"]
    outcomes: list[object] = []
    barrier = threading.Barrier(8)

    def decide(executor: object) -> None:
        barrier.wait()
        try:
            outcomes.append(executor.decide(approval_id, "approve")[1].success)  # type: ignore[attr-defined]
        except ApprovalDecisionError as exc:
            outcomes.append(exc.status)

    threads = [threading.Thread(target=decide, args=(e,)) for e in [first, second] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes, key=str) == [409] * 7 + [True]
    assert lines(out) == ["once"]


def test_a_quota_is_counted_when_the_approved_call_runs_not_when_it_asks(tmp_path: Path) -> None:
    executor, _ = make_executor(writer(quotas=[{"limit": 1, "per_s": 60}]))
    out = tmp_path / "out.txt"
    ids = [
        executor.invoke_sync("Write", {"path": str(out), "line": f"l{i}"}).metadata["approval_id"]
        for i in range(2)
    ]
    assert executor.decide(ids[0], "approve")[1].success  # type: ignore[union-attr]
    over = executor.decide(ids[1], "approve")[1]
    assert over is not None and over.error_type == "quota"
    assert lines(out) == ["l0"]


def test_an_approval_policy_that_raises_fails_the_call_closed(tmp_path: Path) -> None:
    def policy(call: ToolCall) -> bool:
        raise LookupError("policy table missing")

    executor, _ = make_executor(writer(approval="never"), approval_policy=policy)
    out = tmp_path / "out.txt"
    result = executor.invoke_sync("Write", {"path": str(out), "line": "x"})
    assert result.error_type == "denied" and "approval policy raised LookupError" in (result.error or "")
    assert lines(out) == []
