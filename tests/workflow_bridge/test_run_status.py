"""One status everywhere: a workflow per status (`completed`, `completed_with_errors`, `interrupted`,
`failed`, `cancelled`) is run with `echo-tools run`, and the CLI (its `run.finished` line and exit code),
the history (`echo-tools runs`), `GET /workflows/runs/{run_id}` and EchoAI's answer (its
`/workflows/execute` executor, its HITL status) say the same word."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.history import RunHistory
from echo_tools.registry import ToolRegistry
from echo_tools.settings import ApiSettings
from tests.echo_tools._cli_support import InProcessCli
from tests.workflow_bridge._compiler_support import agent, chain, workflow
from tests.workflow_bridge.test_dropin_echoai_host import AgentRegistry, Container, HostExecutor
from workflow_bridge import echoai

EXIT_CODES = {"completed": 0, "interrupted": 0, "completed_with_errors": 1, "failed": 1}


def _calculator(agent_id: str, task: dict[str, Any]) -> dict[str, Any]:
    return agent(agent_id, tools=["tool_calculator"], prompt=f"Compute: {json.dumps(task)}")


def _end() -> dict[str, Any]:
    return agent("end", "End", output_schema=["result"])


def _gated() -> tuple[dict[str, Any], dict[str, Any]]:
    gate = agent("gate", "HITL", metadata={"hitl_config": {"title": "Go on?"}})
    return chain(
        _calculator("adder", {"operation": "add", "values": [2, 3]}), gate, _end(), workflow_id="wf_s"
    )


def _broken_condition() -> tuple[dict[str, Any], dict[str, Any]]:
    branches = [{"type": "if", "condition": "score > 5", "targetNodeId": "end"}]
    check = agent("check", "Conditional", metadata={"branches": branches})
    return workflow(
        [agent("start", "Start"), check, _end()], [("start", "check"), ("check", "end")], workflow_id="wf_s"
    )


WORKFLOWS: dict[str, Callable[[], tuple[dict[str, Any], dict[str, Any]]]] = {
    "completed": lambda: chain(
        _calculator("adder", {"operation": "add", "values": [2, 3]}), _end(), workflow_id="wf_s"
    ),
    "completed_with_errors": lambda: chain(
        _calculator("divider", {"operation": "divide", "values": [1, 0]}), _end(), workflow_id="wf_s"
    ),
    "interrupted": _gated,
    "failed": _broken_condition,
    "cancelled": _gated,
}


def _echoai_answer(
    home: Path, status: str, wf: dict[str, Any], agents: dict[str, Any], run_id: str
) -> str | None:
    """What EchoAI's routes say of the status: its `/workflows/execute` answer for a run of the workflow
    through its executor (and of a cancelled run, its HITL manager's status)."""
    container = Container()
    echoai.install(container, storage_dir=home)
    registry = AgentRegistry(agents, home / "agents")
    container.register("workflow.executor", lambda: HostExecutor({("wf_s", "final"): wf}, registry))
    layer = echoai.install(container, storage_dir=home)
    if status == "cancelled":
        return str(layer.hitl_manager().get_status(run_id)["state"])
    answer = container.resolve("workflow.executor").execute_workflow("wf_s", "final", None, {"message": "go"})
    assert layer.history.run(answer["run_id"])["status"] == answer["status"]  # type: ignore[index]
    if status == "completed_with_errors":
        assert [c["tool_id"] for c in answer["failed_calls"]] == ["tool_calculator"]
    return str(answer["status"])


@pytest.mark.slow  # whole workflow runs (CrewAI, LangGraph)
@pytest.mark.parametrize("status", list(WORKFLOWS))
def test_every_status_is_the_same_word_in_the_cli_the_history_the_api_and_echoai(
    status: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    home, cli = tmp_path / "home", InProcessCli(monkeypatch, capsys)
    wf, agents = WORKFLOWS[status]()
    path = tmp_path / "workflow.json"
    path.write_text(json.dumps({"workflow": wf, "agents": agents}), encoding="utf-8")
    run = cli(home, "run", str(path), "--run-id", "run_s")
    if status == "cancelled":  # paused, then cancelled: it will not be resumed
        assert run.returncode == 0, run.stderr[-2000:]
        cancel = cli(home, "runs", "cancel", "run_s")
        assert (cancel.returncode, cancel.stdout) == (0, "run run_s cancelled\n"), cancel.stderr
        again = cli(home, "resume", "run_s", "--approve")
        assert again.returncode == 1 and "'cancelled', not 'interrupted'" in again.stderr
    else:
        assert f"run.finished  ({status})" in run.stdout, run.stdout[-2000:]
        assert run.returncode == EXIT_CODES[status], run.stdout[-2000:] + run.stderr[-2000:]
    if status in ("completed_with_errors", "failed"):
        assert f"run run_s {status}" in run.stdout + run.stderr

    listed = cli(home, "runs", "--json")
    assert [(r["run_id"], r["status"]) for r in json.loads(listed.stdout)["runs"]] == [("run_s", status)]

    registry = ToolRegistry(storage_dir=home)
    app = create_app(registry, ToolExecutor(registry), ApiSettings(), history=RunHistory(home))
    with TestClient(app, base_url="http://127.0.0.1") as client:  # no key: loopback Host names only
        answer = client.get("/workflows/runs/run_s").json()
    assert answer["status"] == status
    if status == "completed_with_errors":
        assert [c["tool_id"] for c in answer["failed_calls"]] == ["tool_calculator"]
        assert "division by zero" in answer["failed_calls"][0]["error"]

    assert _echoai_answer(home, status, wf, agents, "run_s") == status
