"""Red-team review of issue 34's approvals (in-process, one storage folder): what an approval keeps, what a
change of the row in `runs.sqlite` can do, the seal's key, and the budget an approved call runs under.

Each `xfail(strict=True)` test is a finding: it asserts what should happen and fails on main today; the
other tests are attacks that held."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from echo_tools import MemoryEventLog, ToolContext, ToolExecutor, ToolRegistry
from echo_tools.errors import ScopeRestoreError
from echo_tools.gate import Budget, BudgetMeter, CallScope, Grants, Principal, Seal
from echo_tools.gate.scope import KEY_FILE, SECRET_KEY_ENV
from echo_tools.governance.approvals import ApprovalRecord, SqliteApprovalStore, now_text, seal_record
from tests.echo_tools._skill_support import local_tool, skill_tool

RAN: list[str] = []


def ship(order: str) -> dict[str, Any]:
    """Ship an order (a tool with an external side effect)."""
    RAN.append(order)
    return {"shipped": order}


@pytest.fixture(autouse=True)
def _no_secret_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    RAN.clear()
    yield
    RAN.clear()


def _service(tmp_path: Path, **fields: Any) -> tuple[ToolRegistry, ToolExecutor, MemoryEventLog]:
    """An executor with the in-process tool `ship` (approval always) and approvals beside its history."""
    registry = ToolRegistry(storage_dir=tmp_path / "store")
    registry.add(ship, approval="always", **fields)
    log = MemoryEventLog()
    executor = ToolExecutor(registry, approvals=SqliteApprovalStore(tmp_path / "store"), event_sinks=[log])
    return registry, executor, log


def _edit_row(tmp_path: Path, approval_id: str, change: Callable[[dict[str, Any]], None]) -> None:
    """The attack's step: change an approval's row in the storage folder's runs.sqlite."""
    with sqlite3.connect(tmp_path / "store" / "runs.sqlite") as db:
        (text,) = db.execute(
            "SELECT record FROM echo_approvals WHERE approval_id = ?", (approval_id,)
        ).fetchone()
        record = json.loads(text)
        change(record)
        db.execute(
            "UPDATE echo_approvals SET record = ? WHERE approval_id = ?",
            (json.dumps(record), approval_id),
        )


def _row(tmp_path: Path, approval_id: str) -> dict[str, Any]:
    with sqlite3.connect(tmp_path / "store" / "runs.sqlite") as db:
        (text,) = db.execute(
            "SELECT record FROM echo_approvals WHERE approval_id = ?", (approval_id,)
        ).fetchone()
    return dict(json.loads(text))


# -- the seal covers the scope, not the rest of the approval -----------------------------------------


def test_an_approval_whose_kept_scope_was_removed_runs_nothing_for_a_principal_that_is_gone(
    tmp_path: Path,
) -> None:
    _, executor, _ = _service(tmp_path)
    asked = executor.invoke_sync("ship", {"order": "R-1"}, ToolContext(principal="intern"))
    approval_id = asked.metadata["approval_id"]
    _edit_row(tmp_path, approval_id, lambda r: r.update(scope=None))  # the attack: drop the seal
    known = {"admin": Principal("admin", Grants(admin=True))}
    decided, result = executor.decide(approval_id, "approve", principals=known.get)
    executor.close()
    assert RAN == [], "the call ran for principal 'intern', which no longer exists"
    assert result is not None and not result.success
    assert decided.status == "void"


def test_an_approval_whose_kept_scope_was_removed_does_not_run_without_a_budget(
    tmp_path: Path,
) -> None:
    registry = ToolRegistry(
        storage_dir=tmp_path / "store", allowed_modules=["tests.echo_tools.fixture_tools"]
    )
    registry.register(
        local_tool("adder", "add", {"a": {"type": "number"}, "b": {"type": "number"}}, side_effect="pure")
    )
    steps = [{"id": f"s{i}", "tool": "adder", "input": {"a": i, "b": 1}} for i in range(20)]
    registry.register(
        skill_tool(steps, "$.steps.s0.output", tool_id="many_adds", name="Many adds", approval="always")
    )
    log = MemoryEventLog()
    executor = ToolExecutor(registry, approvals=SqliteApprovalStore(tmp_path / "store"), event_sinks=[log])
    context = ToolContext(principal="alice", budget=BudgetMeter(Budget(max_calls=5)))
    approval_id = executor.invoke_sync("many_adds", {}, context).metadata["approval_id"]
    _edit_row(tmp_path, approval_id, lambda r: r.update(scope=None))
    executor.decide(approval_id, "approve")
    executor.close()
    adds = [e for e in log.events if e.type == "tool.completed" and e.tool_id == "adder"]
    assert len(adds) <= 4, f"{len(adds)} adds ran under a budget of 5 calls"


def test_an_approval_whose_digest_was_removed_is_void_for_a_changed_tool(tmp_path: Path) -> None:
    registry, executor, _ = _service(tmp_path, description="Ship an order to the customer.")
    approval_id = executor.invoke_sync("ship", {"order": "D-1"}).metadata["approval_id"]
    registry.add(ship, approval="always", description="Ship an order anywhere else.")  # changed since
    _edit_row(tmp_path, approval_id, lambda r: r.update(digest=None))
    decided, result = executor.decide(approval_id, "approve")
    executor.close()
    assert RAN == [], "the changed definition ran under an approval of the old one"
    assert decided.status == "void"


def test_an_approval_of_a_changed_tool_is_void(tmp_path: Path) -> None:
    """Held: the same change without touching the row voids the approval (the digest check works)."""
    registry, executor, _ = _service(tmp_path, description="Ship an order to the customer.")
    approval_id = executor.invoke_sync("ship", {"order": "D-2"}).metadata["approval_id"]
    registry.add(ship, approval="always", description="Ship an order anywhere else.")
    decided, result = executor.decide(approval_id, "approve")
    executor.close()
    assert RAN == [] and decided.status == "void"
    assert result is not None and "changed" in (result.error or "")


def test_a_sealed_scope_copied_from_another_approval_is_refused(tmp_path: Path) -> None:
    _, executor, log = _service(tmp_path)
    mine = executor.invoke_sync("ship", {"order": "T-1"}, ToolContext(principal="alice"))
    theirs = executor.invoke_sync("ship", {"order": "T-2"}, ToolContext(principal="shop"))
    stolen = _row(tmp_path, theirs.metadata["approval_id"])["scope"]
    _edit_row(tmp_path, mine.metadata["approval_id"], lambda r: r.update(scope=stolen))
    decided, _ = executor.decide(mine.metadata["approval_id"], "approve")
    executor.close()
    ran = [e.principal for e in log.events if e.type == "tool.completed" and e.tool_id == "tool_ship"]
    assert "shop" not in ran, "alice's approved call ran as principal 'shop'"
    assert RAN == [] and decided.status == "void"


def test_the_end_user_of_an_approved_call_is_the_sealed_one(tmp_path: Path) -> None:
    _, executor, log = _service(tmp_path)
    asked = executor.invoke_sync("ship", {"order": "U-1"}, ToolContext(principal="shop", user_id="u1"))
    approval_id = asked.metadata["approval_id"]
    _edit_row(tmp_path, approval_id, lambda r: r["context"].update(user_id="u9"))  # scope untouched
    _, result = executor.decide(approval_id, "approve")
    executor.close()
    ran = [e.user_id for e in log.events if e.type == "tool.completed" and e.tool_id == "tool_ship"]
    assert ran != ["u9"], "the approved call ran for end user u9; the sealed scope says u1"


async def test_arguments_changed_after_the_decision_do_not_run(tmp_path: Path) -> None:
    _, executor, _ = _service(tmp_path)
    asked = await executor.invoke("ship", {"order": "A-1"}, ToolContext(principal="shop"))
    approval_id = asked.metadata["approval_id"]
    approver = ToolExecutor(
        ToolRegistry(storage_dir=tmp_path / "other"), approvals=SqliteApprovalStore(tmp_path / "store")
    )
    record, result = approver.decide(approval_id, "approve", by="reviewer")  # it has no tool `ship`
    assert record.status == "approved" and result is None and RAN == []
    _edit_row(tmp_path, approval_id, lambda r: r.update(args={"order": "EVIL"}))  # after the decision
    ran = await executor.wait_for_decision(approval_id, timeout_s=10, poll_s=0.05)
    await approver.aclose()
    await executor.aclose()
    assert RAN != ["EVIL"], "the call ran with arguments nobody approved"
    assert not ran.success


# -- the seal's key --------------------------------------------------------------------------------


def test_an_empty_scope_key_file_is_not_a_key(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    folder.mkdir()
    (folder / KEY_FILE).write_bytes(b"")  # a damaged key file (a whole key is linked into place)
    with pytest.raises(ScopeRestoreError, match="holds 0 bytes, not 32"):
        Seal.in_folder(folder)  # refused: never an HMAC key of zero bytes anyone could seal with


def test_the_scope_key_file_is_made_private_and_kept(tmp_path: Path) -> None:
    """Held: the key file is made 0600, 32 bytes, and read again by the next store on the folder."""
    folder = tmp_path / "store"
    folder.mkdir()
    first = Seal.in_folder(folder)
    path = folder / KEY_FILE
    assert path.stat().st_mode & 0o777 == 0o600 and len(path.read_bytes()) == 32
    body = {"principal": "alice"}
    assert Seal.in_folder(folder).verify(body, first.sign(body))
    assert not Seal.in_folder(tmp_path).verify(body, first.sign(body))  # another folder, another key


def test_a_decider_with_another_seal_key_does_not_void_the_approval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, "the-server-secret-0123456789")
    _, server, _ = _service(tmp_path)
    approval_id = server.invoke_sync("ship", {"order": "K-1"}, ToolContext(principal="shop"))
    approval_id = approval_id.metadata["approval_id"]
    monkeypatch.delenv(SECRET_KEY_ENV)  # the approver's process: the same folder, the same tools
    _, approver, _ = _service(tmp_path)
    decided, result = approver.decide(approval_id, "approve")
    assert RAN == []
    stored = server.governance.approvals.get(approval_id)
    server.close()
    approver.close()
    assert stored is not None and stored.status != "void", (
        f"a key mismatch voided the approval: {result.error if result else None}"
    )


# -- which decisions run a call ------------------------------------------------------------------------


async def test_waiting_on_a_paused_run_s_approval_does_not_run_it_outside_the_run(
    tmp_path: Path,
) -> None:
    registry, executor, _ = _service(tmp_path)
    tool = registry.resolve("ship")
    assert tool is not None
    store = executor.governance.approvals
    scope = CallScope(Principal("shop"), run_id="run_paused").to_record(store.seal)
    asked = ApprovalRecord(
        "apr_run_0001", tool.tool_id, tool.name, {"order": "G-1"},
        {"run_id": "run_paused", "principal": "shop"}, kind="run", owner="shop",
        digest=tool.digest, scope=scope, expires_at=now_text(600),
    )  # fmt: skip  # what a tool approval inside a graph keeps (Governance._record, kind "run")
    seal_record(asked, store.seal)
    record = store.add(asked)
    decided, result = executor.decide(record.approval_id, "approve")
    assert result is None and RAN == []  # decide only decides a run's approval: the resume runs it
    carried = await executor.wait_for_decision(record.approval_id, timeout_s=5, poll_s=0.05)
    await executor.aclose()
    assert RAN == [], "the paused run's tool call ran outside its run"
    assert not carried.success and "run_paused" in (carried.error or "")


def test_an_approval_decided_then_waited_for_runs_once(tmp_path: Path) -> None:
    """Held: decide runs it (once); a later wait_for_decision gets the kept result, nothing runs again."""
    import asyncio

    _, executor, _ = _service(tmp_path)
    approval_id = executor.invoke_sync("ship", {"order": "O-1"}).metadata["approval_id"]
    _, result = executor.decide(approval_id, "approve")
    again = asyncio.run(executor.wait_for_decision(approval_id, timeout_s=2, poll_s=0.05))
    executor.close()
    assert result is not None and result.success and again.metadata.get("ran_before") is True
    assert RAN == ["O-1"]


def test_a_void_approval_is_not_run_by_waiting_for_it(tmp_path: Path) -> None:
    """Held: a void approval (the tool changed) stays void for the waiting process."""
    import asyncio

    registry, executor, _ = _service(tmp_path, description="v1")
    approval_id = executor.invoke_sync("ship", {"order": "V-1"}).metadata["approval_id"]
    registry.add(ship, approval="always", description="v2")
    executor.decide(approval_id, "approve")
    registry.add(ship, approval="always", description="v1")  # changed back: the digest matches again
    carried = asyncio.run(executor.wait_for_decision(approval_id, timeout_s=2, poll_s=0.05))
    executor.close()
    assert RAN == [] and not carried.success and "void" in (carried.error or "")


def test_an_expired_approval_edited_back_to_pending_in_its_record_stays_expired(tmp_path: Path) -> None:
    """Held: the status column is what moves (a row's JSON status is not read), and expiry is a column."""
    from echo_tools.governance.approvals import ApprovalDecisionError

    _, executor, _ = _service(tmp_path, approval_ttl_s=0.001)
    approval_id = executor.invoke_sync("ship", {"order": "E-1"}).metadata["approval_id"]
    record = executor.governance.approvals.get(approval_id)
    while record is not None and record.status == "pending":
        record = executor.governance.approvals.get(approval_id)
    _edit_row(tmp_path, approval_id, lambda r: r.update(status="pending"))
    with pytest.raises(ApprovalDecisionError):
        executor.decide(approval_id, "approve")
    executor.close()
    assert RAN == []


# -- the budget an approved call runs under ------------------------------------------------------------


def _adds_registry(tmp_path: Path, steps: int) -> ToolRegistry:
    registry = ToolRegistry(
        storage_dir=tmp_path / "tools", allowed_modules=["tests.echo_tools.fixture_tools"]
    )
    registry.register(
        local_tool("adder", "add", {"a": {"type": "number"}, "b": {"type": "number"}}, side_effect="pure")
    )
    many = [{"id": f"s{i}", "tool": "adder", "input": {"a": i, "b": 1}} for i in range(steps)]
    registry.register(
        skill_tool(many, "$.steps.s0.output", tool_id="many_adds", name="Many adds", approval="always")
    )
    return registry


@pytest.mark.xfail(
    strict=True,
    reason="each approved call gets a copy of the asking meter's totals (BudgetMeter.resumed), not the "
    "meter: two approvals asked under one budget of 5 calls each spend what was left, and the asking "
    "meter never sees their calls",
)
def test_two_approvals_asked_under_one_budget_share_it(tmp_path: Path) -> None:
    log = MemoryEventLog()
    executor = ToolExecutor(_adds_registry(tmp_path, 20), event_sinks=[log])
    meter = BudgetMeter(Budget(max_calls=5))
    context = ToolContext(principal="alice", budget=meter)
    first = executor.invoke_sync("many_adds", {}, context).metadata["approval_id"]
    second = executor.invoke_sync("many_adds", {}, context).metadata["approval_id"]
    executor.decide(first, "approve")
    executor.decide(second, "approve")
    executor.close()
    calls = [e for e in log.events if e.type == "tool.invoked"]
    # 5 calls in all under one meter: the two asks, then at most 3 more
    assert len(calls) <= 5, f"{len(calls)} calls ran under one budget of 5 (meter says {meter.calls})"


# -- waiting for a decision ----------------------------------------------------------------------------


@pytest.mark.parametrize("given", [{"timeout_s": float("nan")}, {"timeout_s": 1.0, "poll_s": -1.0}])
async def test_waiting_for_a_decision_refuses_a_timeout_that_never_ends(
    tmp_path: Path, given: dict[str, float]
) -> None:
    import asyncio

    from echo_tools.errors import ToolConfigError

    _, executor, _ = _service(tmp_path)
    approval_id = (await executor.invoke("ship", {"order": "W-1"})).metadata["approval_id"]
    try:
        with pytest.raises((ValueError, ToolConfigError)):
            await asyncio.wait_for(executor.wait_for_decision(approval_id, **given), timeout=3)
    finally:
        await executor.aclose()


async def test_a_decision_racing_a_waiting_process_runs_the_call_once(tmp_path: Path) -> None:
    """Held: a decide (which runs the call here) while another executor on the same store waits for the
    decision: the call runs once, and the waiting side gets its result or a refusal, never a second run."""
    import asyncio

    _, asker, _ = _service(tmp_path)
    _, decider, _ = _service(tmp_path)  # a second process's executor: the same tool, the same store
    approval_id = (await asker.invoke("ship", {"order": "Q-1"})).metadata["approval_id"]
    waiting = asyncio.create_task(asker.wait_for_decision(approval_id, timeout_s=30, poll_s=0.01))
    _, decided = await asyncio.to_thread(decider.decide, approval_id, "approve")
    carried = await waiting
    await asker.aclose()
    await decider.aclose()
    assert RAN == ["Q-1"]  # whichever side claimed the approval first ran it; the other did not
    assert decided is not None
    ran_here = [r for r in (decided, carried) if r.success and not r.metadata.get("ran_before")]
    assert len(ran_here) <= 1, (decided, carried)
