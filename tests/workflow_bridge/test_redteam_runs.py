"""Red-team review of issue 34's paused runs over HTTP (a multi-principal server, real CrewAI/LangGraph
runs): what a run's record keeps of its scope, and what a resume carries on under when it keeps none.

Each `xfail(strict=True)` test is a finding (it asserts what should happen and fails on main today); the
other tests are attacks that held."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from echo_tools.history import RunHistory
from tests.echo_tools.test_call_scope_attacks import (
    ADD,
    ALICE,
    OPERATOR,
    _agent,
    _calls,
    _canvas,
    _gate,
    _resume,
    _start,
    server,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning"),
    pytest.mark.slow,  # whole workflow runs (CrewAI, LangGraph)
]
__all__ = ["server"]  # the fixture of test_call_scope_attacks: alice has permissions [], bob max_calls 3


def _gated_code_run() -> dict[str, Any]:
    return _canvas(
        [
            _agent(0, "Adder", ADD, "tool_calculator"),
            _gate("Go on?"),
            _agent(0, "Runner", {"code": "print(6 * 7)"}, "tool_code_executor"),
        ]
    )


def _edit_run(history: RunHistory, run_id: str, change: Any) -> None:
    """The attack's step (or a run recorded by 42d7c4c, before scopes were kept): change the run's row."""
    history.flush()
    with sqlite3.connect(Path(history.path)) as db:
        (text,) = db.execute("SELECT source FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        stored = json.loads(text)
        change(stored)
        db.execute("UPDATE runs SET source = ? WHERE run_id = ?", (json.dumps(stored), run_id))


def test_a_run_recorded_without_a_scope_resumes_with_its_owner_s_ceiling(
    server: tuple[str, RunHistory],
) -> None:
    url, history = server
    assert _start(url, ALICE, _gated_code_run(), "run_alice_unsealed")["status"] == "interrupted"
    _edit_run(history, "run_alice_unsealed", lambda s: s.pop("scope"))
    _resume(url, ALICE, "run_alice_unsealed")  # the owner resumes her own run
    calls = _calls(history, "run_alice_unsealed", "tool_code_executor")
    assert [e.type for e in calls] == ["tool.failed"], [(e.type, e.principal, e.error) for e in calls]
    assert calls[0].error_type == "permission_denied"


def test_a_run_s_owner_changed_in_its_record_does_not_hand_the_run_over(
    server: tuple[str, RunHistory],
) -> None:
    from echo_tools.gate import Grants, Principal
    from workflow_bridge.runner import RunResumeError, resume_run

    url, history = server
    assert _start(url, ALICE, _gated_code_run(), "run_alice_owner")["status"] == "interrupted"
    _edit_run(history, "run_alice_owner", lambda s: s.update(owner="mallory"))
    mallory = Principal("mallory", Grants(actions=("approve",)))
    with pytest.raises(RunResumeError) as refused:
        resume_run("run_alice_owner", "approve", storage=history, principal=mallory)
    assert refused.value.status == 409


def test_a_run_whose_owner_was_removed_is_not_resumed(server: tuple[str, RunHistory]) -> None:
    """Held: an admin resuming a paused run whose owner is no longer in the principals table gets 409
    `scope` and nothing runs."""
    from echo_tools.gate import OPERATOR as ADMIN
    from workflow_bridge.runner import RunResumeError, resume_run

    url, history = server
    assert _start(url, ALICE, _gated_code_run(), "run_alice_gone")["status"] == "interrupted"
    with pytest.raises(RunResumeError) as refused:
        resume_run(
            "run_alice_gone", "approve", storage=history, principal=ADMIN, principals=lambda _name: None
        )
    assert refused.value.status == 409 and refused.value.field == "scope"
    assert "'alice'" in str(refused.value) and "no longer exists" in str(refused.value)
    assert _calls(history, "run_alice_gone", "tool_code_executor") == []
    _resume(url, OPERATOR, "run_alice_gone")  # the server's table still has alice: it goes on, as hers
    calls = _calls(history, "run_alice_gone", "tool_code_executor")
    assert [(e.type, e.error_type) for e in calls] == [("tool.failed", "permission_denied")]
