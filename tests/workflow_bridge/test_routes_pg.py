"""The `/workflows` routes on PostgreSQL: two `echo-tools serve` replicas on one real database; a HITL
canvas without `workflow_id` is run on one (`POST /workflows/run`) and resumed on the other, whose
recompiled graph finds the paused node and runs the rest of the workflow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.pg import PgRunHistory
from tests.echo_tools._cli_support import InProcessCli
from tests.echo_tools._pg_support import PgServer, free_port, replicas_up, spawn
from tests.echo_tools.test_api_server import sse_frames
from tests.workflow_bridge._canvas_runs import gated_canvas


@pytest.fixture(scope="module")
def two_replicas(pg_server: PgServer) -> Iterator[tuple[str, list[str]]]:
    """Two replicas on one database, started one after the other (the first fills the empty catalogue)."""
    dsn = pg_server.new_database()
    urls = []
    with ExitStack() as stack:
        for _ in range(2):
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            stack.enter_context(replicas_up([spawn("serve", dsn, str(port))], [f"{url}/tools"]))
            urls.append(url)
        yield dsn, urls


def _run(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=300) as client:
        with client.stream("POST", "/workflows/run", json=body) as stream:
            assert stream.status_code == 200
            return list(sse_frames(stream.iter_lines()))


@pytest.mark.slow  # two server processes importing CrewAI and LangGraph
def test_a_hitl_canvas_run_on_one_replica_is_resumed_on_the_other(
    two_replicas: tuple[str, list[str]],
) -> None:
    dsn, (first, second) = two_replicas
    frames = _run(first, {**gated_canvas(), "run_id": "run_pg_http"})
    assert frames[-1]["event"] == "run.completed", frames[-1]
    assert frames[-1]["data"]["status"] == "interrupted"
    assert frames[-1]["data"]["state"]["__interrupt__"][0]["title"] == "Go on?"
    with httpx.Client(base_url=second, timeout=300) as client:
        assert client.get("/workflows/runs/run_pg_http").json()["status"] == "interrupted"
        resumed = client.post("/workflows/runs/run_pg_http/resume", json={"decision": "approve"})
        assert resumed.status_code == 200, resumed.text
        assert resumed.json()["status"] == "completed"
        assert '"result": 42' in resumed.json()["state"]["crew_result"]  # the second agent ran there
    history = PgRunHistory(dsn)
    try:
        calls = [
            e.input["operation"] for e in history.events(run_id="run_pg_http") if e.type == "tool.invoked"
        ]
    finally:
        history.close()
    assert calls == ["add", "multiply"]


def test_the_cli_on_postgresql_pauses_in_one_storage_and_resumes_from_another(
    pg_server: PgServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    run_cli = InProcessCli(monkeypatch, capsys)
    dsn = pg_server.new_database()
    canvas = tmp_path / "canvas.json"
    canvas.write_text(json.dumps(gated_canvas()), encoding="utf-8")
    paused = run_cli(tmp_path / "a", "--database-url", dsn, "run", str(canvas), "--run-id", "run_pg_cli")
    assert paused.returncode == 0, paused.stderr[-2000:]
    assert "run run_pg_cli interrupted" in paused.stdout
    resumed = run_cli(tmp_path / "b", "--database-url", dsn, "resume", "run_pg_cli", "--approve")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert '"result": 42' in resumed.stdout  # the second agent ran in the resuming "machine"
