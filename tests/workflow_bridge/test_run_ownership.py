"""Issue 22 finding 4, as an attacker with a key of their own would try it: a `run_id` already in the history
is refused (409; the earlier run, its source and its pause stay as they were), and a paused run is resumed
or read only by the principal that started it or an admin (409 `owned` naming the owner). The CLI and
in-process Python are the operator."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.gate import hash_key, principals_from
from echo_tools.history import RunHistory
from echo_tools.registry import ToolRegistry
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools._cli_support import InProcessCli
from tests.echo_tools.test_api_server import sse_frames
from tests.workflow_bridge._canvas_runs import gated_canvas
from tests.workflow_bridge._compiler_support import agent_tools_registry, make_executor
from workflow_bridge.runner import RunResumeError, resume_run, run_workflow

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

OPERATOR = {"X-API-Key": "operator-key-0123456789"}
ALICE = {"X-API-Key": "alice-key-0123456789"}
MALLORY = {"X-API-Key": "mallory-key-0123456789"}
PRINCIPALS = {
    "principals": [
        {"name": "alice", "key_sha256": hash_key(ALICE["X-API-Key"]), "actions": ["run", "approve", "history"]},
        {"name": "mallory", "key_sha256": hash_key(MALLORY["X-API-Key"]),
         "actions": ["run", "approve", "history"]},
    ]
}  # fmt: skip


def test_a_run_id_already_recorded_is_refused_and_the_earlier_run_is_kept(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    registry = agent_tools_registry()
    executor, log = make_executor(registry)
    run_workflow(gated_canvas(), registry=registry, executor=executor, run_id="run_taken", history=history)
    before = history.run("run_taken")
    calls = len(log.events)
    other = {**gated_canvas(), "workflow_name": "Another workflow"}
    with pytest.raises(RunResumeError, match="'run_taken'") as caught:
        run_workflow(other, registry=registry, executor=executor, run_id="run_taken", history=history)
    assert (caught.value.status, caught.value.field) == (409, "run_id")
    assert "already" in str(caught.value)
    assert history.run("run_taken") == before and len(log.events) == calls  # nothing ran, nothing replaced
    assert before is not None and before["owner"] == "operator"


def test_the_cli_refuses_a_run_id_already_recorded_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cli, home = InProcessCli(monkeypatch, capsys), tmp_path / "home"
    path = tmp_path / "canvas.json"
    path.write_text(json.dumps(gated_canvas()), encoding="utf-8")
    assert cli(home, "run", str(path), "--run-id", "run_cli_taken").returncode == 0
    again = cli(home, "run", str(path), "--run-id", "run_cli_taken")
    assert again.returncode == 1
    lines = again.stderr.strip().splitlines()
    assert len(lines) == 1 and "'run_cli_taken'" in lines[0] and "already" in lines[0], again.stderr
    assert RunHistory(home).run("run_cli_taken")["status"] == "interrupted"  # type: ignore[index]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    registry = ToolRegistry(storage_dir=tmp_path / "tools")
    registry.discover_local_tools([Path(__file__).resolve().parents[2] / "AgentTools"])
    executor = ToolExecutor(registry)
    settings = ApiSettings(api_key=OPERATOR["X-API-Key"], principals=principals_from(PRINCIPALS))
    app = create_app(registry, executor, settings, history=RunHistory(tmp_path / "tools"))
    with support.serve_in_thread(app) as url:
        yield url
    executor.close()


def _run(url: str, headers: dict[str, str], run_id: str) -> httpx.Response | list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=300, headers=headers) as http:
        with http.stream("POST", "/workflows/run", json={**gated_canvas(), "run_id": run_id}) as stream:
            if stream.status_code != 200:
                stream.read()
                return stream
            return list(sse_frames(stream.iter_lines()))


@pytest.mark.slow  # whole workflow runs (CrewAI, LangGraph)
def test_another_principal_cannot_reuse_resume_or_read_a_paused_run(server: str) -> None:
    frames = _run(server, ALICE, "run_alice")
    assert isinstance(frames, list) and frames[-1]["data"]["status"] == "interrupted"

    reused = _run(server, MALLORY, "run_alice")  # the attack: replace alice's paused run with another
    assert isinstance(reused, httpx.Response) and reused.status_code == 409, reused
    assert (reused.json()["error_type"], reused.json()["field"]) == ("owned", "body.run_id")
    assert "'run_alice'" in reused.json()["message"] and "'alice'" in reused.json()["message"]

    with httpx.Client(base_url=server, timeout=300) as http:
        taken = http.post("/workflows/runs/run_alice/resume", json={"decision": "approve"}, headers=MALLORY)
        assert taken.status_code == 409, taken.text
        assert (taken.json()["error_type"], taken.json()["field"]) == ("owned", "owner")
        assert "'alice'" in taken.json()["message"] and "'mallory'" in taken.json()["message"]
        read = http.get("/workflows/runs/run_alice", headers=MALLORY)
        assert (read.status_code, read.json()["error_type"]) == (409, "owned")

        mine = http.get("/workflows/runs/run_alice", headers=ALICE).json()
        assert (mine["status"], mine["owner"]) == ("interrupted", "alice")  # nothing changed
        done = http.post("/workflows/runs/run_alice/resume", json={"decision": "approve"}, headers=ALICE)
        assert done.status_code == 200 and done.json()["status"] == "completed", done.text
        assert '"result": 42' in done.json()["state"]["crew_result"]


@pytest.mark.slow
def test_an_admin_resumes_a_run_another_principal_started(server: str) -> None:
    frames = _run(server, ALICE, "run_alice_2")
    assert isinstance(frames, list) and frames[-1]["data"]["status"] == "interrupted"
    with httpx.Client(base_url=server, timeout=300, headers=OPERATOR) as http:
        done = http.post("/workflows/runs/run_alice_2/resume", json={"decision": "approve"})
        assert done.status_code == 200 and done.json()["status"] == "completed", done.text


def test_resume_by_another_principal_in_python_is_refused(tmp_path: Path) -> None:
    from echo_tools.gate import Grants, Principal

    history = RunHistory(tmp_path)
    registry = agent_tools_registry()
    executor, _ = make_executor(registry)
    run_workflow(
        gated_canvas(), registry=registry, executor=executor, run_id="run_own", history=history, owner="alice"
    )
    bob = Principal("bob", Grants(actions=frozenset({"approve"})))
    with pytest.raises(RunResumeError, match="'alice'") as caught:
        resume_run("run_own", "approve", storage=history, registry=registry, executor=executor, principal=bob)
    assert (caught.value.status, caught.value.field) == (409, "owner")
    assert history.run("run_own")["status"] == "interrupted"  # type: ignore[index]
