"""The /workflows routes: compile a canvas, run a workflow with its events streamed, and keep serving
other requests while a run is blocked in a tool (EchoAI ran workflows on its gateway's event loop)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools.test_api_server import sse_frames

# crewai 1.15's own import trips an ImportWarning (crewai.rag refuses the attribute for its child module
# 'embeddings'), which filterwarnings=error would turn into a failure; import the bridge once, quietly.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    import workflow_bridge.runner  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_workflows" / "code_pipeline.canvas.json"

WAIT_WORKFLOW = {
    "workflow": {
        "workflow_id": "wf_wait",
        "name": "Wait",
        "execution_model": "sequential",
        "agents": ["agt_wait"],
        "connections": [],
    },
    "agents": {
        "agt_wait": {
            "agent_id": "agt_wait",
            "name": "Waiter Agent",
            "role": "Waiter",
            "goal": "wait for the release",
            "prompt": "Call the waiter tool.",
            "tools": ["tool_waiter"],
            "metadata": {"node_type": "Agent"},
        }
    },
}


@pytest.fixture
def registry(tmp_path: Path) -> Any:
    registry = support.make_registry(tmp_path / "tools", support.ECHO, support.WAITER)
    registry.discover_local_tools([REPO / "AgentTools"])
    return registry


@pytest.fixture
async def client(registry: Any) -> AsyncIterator[httpx.AsyncClient]:
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, ApiSettings())
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client
    await executor.aclose()


@pytest.fixture
def server(registry: Any) -> Iterator[str]:
    executor = ToolExecutor(registry)
    with support.serve_in_thread(create_app(registry, executor, ApiSettings())) as url:
        yield url
    support.RELEASE.set()  # never leave a waiting tool behind
    executor.close()


async def test_compile_returns_diagnostics_nodes_and_edges_of_the_sample_canvas(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post(
        "/workflows/compile", content=SAMPLE.read_bytes(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"diagnostics", "nodes", "edges"}
    assert not [d for d in body["diagnostics"] if d["level"] == "error"]
    names = {n["id"] for n in body["nodes"]}
    assert {"__start__", "__end__"} <= names
    assert len(body["nodes"]) >= 5
    assert any(e["source"] == "__start__" for e in body["edges"])
    assert any(e["target"] == "__end__" for e in body["edges"])


async def test_compile_of_a_canvas_with_an_unknown_tool_is_422_with_the_diagnostics(
    client: httpx.AsyncClient,
) -> None:
    canvas = {
        "canvas_nodes": [
            {"id": 1, "type": "Start", "name": "Start", "config": {}},
            {
                "id": 2,
                "type": "Agent",
                "name": "Lost Agent",
                "config": {
                    "prompt": "x",
                    "tools": [
                        {"tool_id": "tool_missing", "name": "Missing", "type": "local", "enabled": True}
                    ],
                },
            },
            {"id": 3, "type": "End", "name": "End", "config": {}},
        ],
        "connections": [{"id": 10, "from": 1, "to": 2}, {"id": 11, "from": 2, "to": 3}],
        "workflow_name": "Broken",
        "execution_model": "sequential",
    }
    response = await client.post("/workflows/compile", json=canvas)
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error_type"] == "validation"
    errors = [d for d in body["diagnostics"] if d["level"] == "error"]
    assert errors and any("tool_missing" in d["message"] or "Missing" in d["message"] for d in errors)


async def test_compile_of_an_unrecognised_body_is_422(client: httpx.AsyncClient) -> None:
    response = await client.post("/workflows/compile", json={"hello": "world"})
    assert response.status_code == 422
    assert "unrecognised workflow source" in response.json()["message"]


def run_frames(url: str, body: dict[str, Any], frames: list[dict[str, Any]]) -> None:
    with httpx.Client(base_url=url, timeout=120) as client:
        with client.stream("POST", "/workflows/run", json=body) as stream:
            assert stream.status_code == 200
            frames.extend(sse_frames(stream.iter_lines()))


def test_run_streams_node_and_tool_events_then_the_final_state(server: str) -> None:
    support.RELEASE.set()
    frames: list[dict[str, Any]] = []
    run_frames(
        server, {**WAIT_WORKFLOW, "user_input": 'please {"text": "hello"}', "run_id": "run-w1"}, frames
    )
    kinds = [f["event"] for f in frames]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed"
    assert kinds.index("node.started") < kinds.index("tool.invoked") < kinds.index("tool.completed")
    completed = next(f["data"] for f in frames if f["event"] == "tool.completed")
    assert completed["tool_id"] == "tool_waiter" and completed["run_id"] == "run-w1"
    assert completed["output"] == {"released": True, "text": "hello"}
    final = frames[-1]["data"]["state"]
    assert final["run_id"] == "run-w1"
    assert "waiter returned" in final["crew_result"]


def test_other_requests_are_served_while_a_workflow_runs(server: str) -> None:
    support.RELEASE.clear()
    support.ENTERED.clear()
    frames: list[dict[str, Any]] = []
    runner = threading.Thread(target=run_frames, args=(server, {**WAIT_WORKFLOW, "user_input": "go"}, frames))
    runner.start()
    try:
        assert support.ENTERED.wait(120), "the workflow never reached its tool"
        with httpx.Client(base_url=server, timeout=10) as client:
            assert client.get("/tools/health").json()["status"] == "healthy"
            echoed = client.post("/tools/invoke/echo", json={"text": "meanwhile"})
            assert echoed.json()["output"] == {"echo": "meanwhile"}
        assert runner.is_alive() and not any(f["event"] == "run.completed" for f in frames)
    finally:
        support.RELEASE.set()
        runner.join(120)
    assert frames[-1]["event"] == "run.completed"


def test_a_run_of_a_broken_source_ends_with_run_failed(server: str) -> None:
    frames: list[dict[str, Any]] = []
    run_frames(server, {"hello": "world", "user_input": "x"}, frames)
    assert [f["event"] for f in frames] == ["run.started", "run.failed"]
    assert frames[-1]["data"]["error_type"] == "validation", frames[-1]
    assert "unrecognised workflow source" in frames[-1]["data"]["message"]
