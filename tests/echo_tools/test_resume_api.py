"""`GET /workflows/runs/{run_id}` and `POST /workflows/runs/{run_id}/resume`: a run paused by `echo-tools run`
is read and resumed through a real server on the same storage folder; bad requests get the API's error
contract naming the field.

The runs are paused in this process (`echo_tools.cli.main`): a second interpreter would import CrewAI
again for several seconds of CPU; test_resume_cli.py resumes a paused run from a process of its own."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools._cli_support import run_in_process
from tests.echo_tools.test_resume_cli import gated_workflow

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    import workflow_bridge.runner  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")


@pytest.fixture(scope="module")
def paused_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage folder where `echo-tools run` left two runs paused at the HITL gate: `run_api_1` (the
    one the server reads and resumes) and `run_api_2` (the bad requests, which leave it paused)."""
    folder = tmp_path_factory.mktemp("resume_api")
    home = folder / "home"
    workflow = gated_workflow(folder)
    for run_id in ("run_api_1", "run_api_2"):
        paused = run_in_process(home, "run", str(workflow), "--run-id", run_id)
        assert paused.returncode == 0, paused.stderr[-2000:]
        assert f"run {run_id} interrupted" in paused.stdout
    return home


@pytest.fixture(scope="module")
def server(paused_home: Path) -> Iterator[str]:
    """One server for the module on the storage folder (its own registry and executor, as a separate
    service would open them)."""
    registry = ToolRegistry(storage_dir=paused_home)
    executor = ToolExecutor(registry)
    with support.serve_in_thread(create_app(registry, executor, ApiSettings())) as url:
        yield url
    executor.close()


def _error(response: httpx.Response, status: int, error_type: str, field: str | None) -> str:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert (body["error_type"], body["field"]) == (error_type, field)
    return str(body["message"])


@pytest.mark.slow  # the paused runs are whole workflow runs (CrewAI, LangGraph)
def test_a_paused_run_is_read_and_resumed_over_http(server: str) -> None:
    with httpx.Client(base_url=server, timeout=120) as client:
        paused = client.get("/workflows/runs/run_api_1")
        assert paused.status_code == 200, paused.text
        body = paused.json()
        assert (body["run_id"], body["status"]) == ("run_api_1", "interrupted")
        assert body["state"]["__interrupt__"][0]["title"] == "Ship the sum?"

        resumed = client.post(
            "/workflows/runs/run_api_1/resume", json={"decision": "edit", "edits": {"crew_result": "five"}}
        )
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "completed"
        assert resumed.json()["state"]["result"] == "five"
        assert client.get("/workflows/runs/run_api_1").json()["status"] == "completed"

        again = client.post("/workflows/runs/run_api_1/resume", json={"decision": "approve"})
        assert "'completed'" in _error(again, 409, "conflict", "status")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "field", "shown"),
    [
        ({"decision": "maybe"}, "body.decision", "'maybe'"),
        ({"decision": ["approve"]}, "body.decision", "['approve']"),
        ({}, "body.decision", "decision is required"),
        ({"decision": "edit"}, "body.edits", "edits must be an object"),
        ({"decision": "edit", "edits": "five"}, "body.edits", "'five'"),
        ({"decision": "approve", "verdict": 1}, "body.verdict", "'verdict'"),
    ],
)
def test_a_resume_request_that_does_not_fit_the_node_is_a_422_naming_the_field(
    server: str, body: dict[str, Any], field: str, shown: str
) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        response = client.post("/workflows/runs/run_api_2/resume", json=body)
        assert shown in _error(response, 422, "validation", field)
        assert client.get("/workflows/runs/run_api_2").json()["status"] == "interrupted"


@pytest.mark.slow
def test_an_unknown_run_is_a_404_naming_it(server: str) -> None:
    with httpx.Client(base_url=server, timeout=60) as client:
        for response in (
            client.get("/workflows/runs/run_nope"),
            client.post("/workflows/runs/run_nope/resume", json={"decision": "approve"}),
        ):
            assert "'run_nope'" in _error(response, 404, "not_found", "run_id")


@pytest.mark.slow
def test_a_run_paused_at_a_node_its_workflow_no_longer_has_is_a_409_naming_it(
    server: str, paused_home: Path
) -> None:
    from echo_tools.history import RunHistory

    paused = run_in_process(
        paused_home, "run", str(gated_workflow(paused_home.parent)), "--run-id", "run_api_3"
    )
    assert paused.returncode == 0, paused.stderr[-2000:]
    history = RunHistory(paused_home)
    history.set_status("run_api_3", "interrupted", details={"paused_at": ["gate_renamed"]})
    history.close()
    with httpx.Client(base_url=server, timeout=60) as client:
        response = client.post("/workflows/runs/run_api_3/resume", json={"decision": "approve"})
        message = _error(response, 409, "conflict", "nodes")
        assert "gate_renamed" in message and "no node" in message
        assert client.get("/workflows/runs/run_api_3").json()["status"] == "interrupted"
