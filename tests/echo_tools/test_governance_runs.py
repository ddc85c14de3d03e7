"""A workflow run whose CrewAI agent calls a tool needing approval pauses (`echo-tools run` exits 0,
interrupted); `echo-tools approvals approve` from another process decides it and carries the run on; the
tool ran once; a second decision is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools import ToolRegistry
from echo_tools.governance import governance_stores
from echo_tools.history import RunHistory
from tests.workflow_bridge._compiler_support import agent, chain

from ._cli_support import InProcessCli, cli
from .test_governance_approvals import LINE_SCHEMA, SIDE

FIXTURES = "tests.echo_tools.fixture_tools"


def approval_workflow(folder: Path, out: Path) -> Path:
    """An agent bound to a tool that needs approval, then the end; the task names the arguments."""
    task = json.dumps({"path": str(out), "line": "approved line"})
    wf, agents = chain(
        agent("scribe", name="Scribe", tools=["tool_write"], prompt=f"Write: {task}"),
        agent("end", "End", output_schema=["result"]),
        workflow_id="wf_approval",
    )
    path = folder / "approval.json"
    path.write_text(json.dumps({"workflow": wf, "agents": agents}), encoding="utf-8")
    return path


def catalogue(home: Path) -> None:
    registry = ToolRegistry(storage_dir=home, allowed_modules=[FIXTURES])
    registry.register(
        {
            "name": "Write",
            "description": "Append a line to a file.",
            "tool_type": "local",
            "input_schema": LINE_SCHEMA,
            "execution_config": {"module": SIDE, "function": "append_line"},
            "approval": "always",
        }
    )


@pytest.mark.slow  # a fresh interpreter importing CrewAI and LangGraph
def test_a_run_paused_for_approval_is_carried_on_by_approvals_approve_from_another_process(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home, out = tmp_path / "home", tmp_path / "out.txt"
    catalogue(home)
    allow = ("--allow-module", FIXTURES)
    paused = run_cli(home, *allow, "run", str(approval_workflow(tmp_path, out)), "--run-id", "run_appr")
    assert paused.returncode == 0, paused.stderr[-2000:]
    assert "run run_appr interrupted" in paused.stdout
    assert not out.exists()
    (pending,) = json.loads(run_cli(home, *allow, "approvals", "list", "--json").stdout)["approvals"]
    assert pending["run_id"] == "run_appr" and pending["agent_name"] == "Scribe"
    assert pending["args"] == {"path": str(out), "line": "approved line"}
    # the pause says what it waits for: the tool approval, its tool, arguments, agent and id, not "HITL"
    said = " ".join(paused.stdout.split())
    assert f"waiting for approval {pending['approval_id']} of a call of tool 'tool_write'" in said
    assert "by agent 'Scribe'" in said and '"line": "approved line"' in said and "HITL" not in said
    assert f"echo-tools approvals approve {pending['approval_id']}" in said
    shown = run_cli(home, *allow, "runs", "show", "run_appr", "--json")
    waiting = json.loads(shown.stdout)["waiting_for"]
    assert [(w["kind"], w["approval_id"], w["tool"]) for w in waiting] == [
        ("tool_approval", pending["approval_id"], "tool_write")
    ]
    (listed,) = json.loads(run_cli(home, *allow, "runs", "--json").stdout)["runs"]
    assert (listed["status"], listed["failed"]) == ("interrupted", 0)  # waiting for a person is no failure

    approved = cli(home, *allow, "approvals", "approve", pending["approval_id"], timeout=300)
    assert approved.returncode == 0, approved.stderr[-2000:]
    assert f"approval {pending['approval_id']} approved" in approved.stdout
    assert "run.resumed" in approved.stdout and "== crew_result (run run_appr) ==" in approved.stdout
    assert out.read_text().splitlines() == ["approved line"]
    assert RunHistory(home).run("run_appr")["status"] == "completed"  # type: ignore[index]

    again = run_cli(home, *allow, "approvals", "approve", pending["approval_id"])
    assert again.returncode == 1 and "already" in again.stderr
    assert out.read_text().splitlines() == ["approved line"]


def test_a_rejected_approval_carries_the_run_on_without_the_call(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home, out = tmp_path / "home", tmp_path / "out.txt"
    catalogue(home)
    allow = ("--allow-module", FIXTURES)
    run_cli(home, *allow, "run", str(approval_workflow(tmp_path, out)), "--run-id", "run_rej")
    (pending,) = json.loads(run_cli(home, *allow, "approvals", "list", "--json").stdout)["approvals"]
    rejected = run_cli(home, *allow, "approvals", "reject", pending["approval_id"], "--comment", "not now")
    assert "run.resumed" in rejected.stdout, rejected.stderr[-2000:]
    assert "rejected" in rejected.stdout
    assert not out.exists()
    # a rejection is a person's decision, not a tool failure: the model was told, and the run completed
    assert rejected.returncode == 0, rejected.stderr[-2000:]
    record = RunHistory(home).run("run_rej")
    assert record is not None and record["status"] == "completed" and not record["error"]


def test_approving_over_http_carries_the_paused_run_on_in_the_same_request(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from echo_tools import ToolExecutor, create_app

    home, out = tmp_path / "home", tmp_path / "out.txt"
    catalogue(home)
    run_cli(
        home, "--allow-module", FIXTURES, "run", str(approval_workflow(tmp_path, out)), "--run-id", "run_h"
    )
    registry = ToolRegistry(storage_dir=home, allowed_modules=[FIXTURES])
    executor = ToolExecutor(registry, **governance_stores(RunHistory(home)))  # as `echo-tools serve` opens it
    client = TestClient(create_app(registry, executor), base_url="http://127.0.0.1")
    (pending,) = client.get("/tools/approvals").json()["approvals"]
    assert pending["run_id"] == "run_h" and not out.exists()

    done = client.post(f"/tools/approvals/{pending['approval_id']}", json={"decision": "approve"})
    assert done.status_code == 200, done.text
    answer = done.json()
    assert answer["approval"]["status"] == "approved" and answer["result"] is None
    assert (answer["run"]["run_id"], answer["run"]["status"]) == ("run_h", "completed")
    assert out.read_text().splitlines() == ["approved line"]  # the run went on, and the tool ran once
    assert client.get("/workflows/runs/run_h").json()["status"] == "completed"

    again = client.post(f"/tools/approvals/{pending['approval_id']}", json={"decision": "approve"})
    assert again.status_code == 409 and pending["approval_id"] in again.json()["message"]
    resumed = client.post("/workflows/runs/run_h/resume", json={"decision": "approve"})
    assert resumed.status_code == 409
    assert out.read_text().splitlines() == ["approved line"]
    executor.close()


def test_an_approval_outside_a_recorded_run_answers_no_run(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from echo_tools import ToolExecutor, create_app

    catalogue(tmp_path / "home")
    registry = ToolRegistry(storage_dir=tmp_path / "home", allowed_modules=[FIXTURES])
    executor = ToolExecutor(registry)
    client = TestClient(create_app(registry, executor), base_url="http://127.0.0.1")
    asked = client.post("/tools/invoke/Write", json={"path": str(tmp_path / "o.txt"), "line": "x"})
    approval_id = asked.json()["result"]["metadata"]["approval_id"]
    done = client.post(f"/tools/approvals/{approval_id}", json={"decision": "approve"}).json()
    assert done["run"] is None and done["result"]["success"] is True
    executor.close()
