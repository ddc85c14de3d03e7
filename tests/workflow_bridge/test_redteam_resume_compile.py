"""Red-team review of issue 34: a resume compiles the run's source again, and that compile runs before the
run's kept scope is made the one acting (`runner.resume_run`: `_recompiled` before `_active(scope)`). In the
resume route's worker thread nothing else is acting, so the compile's gate checks see the operator.
A real MCP server over streamable HTTP on 127.0.0.1 and a real uvicorn server.

Each `xfail(strict=True)` test is a finding (it asserts what should happen and fails on main today)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import EgressPolicy, ToolRegistry
from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.gate import hash_key, principals_from
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools._mcp_support import HttpServer
from tests.echo_tools.test_api_server import sse_frames
from tests.workflow_bridge._mapper_support import chain, node

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning"),
]

OPERATOR = {"X-API-Key": "operator-key-0123456789"}
IDE = {"X-API-Key": "ide-key-0123456789"}  # may run and decide its own pauses, never add MCP servers
PRINCIPALS = {
    "principals": [
        {"name": "ide", "key_sha256": hash_key(IDE["X-API-Key"]), "actions": ["run", "approve", "history"]},
    ]
}  # fmt: skip


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[HttpServer]:
    running = HttpServer().start()
    yield running
    running.stop()


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    return ToolRegistry(tmp_path / "tools", egress=EgressPolicy.local())


@pytest.fixture
def api(registry: ToolRegistry) -> Iterator[str]:
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    settings = ApiSettings(api_key=OPERATOR["X-API-Key"], principals=principals_from(PRINCIPALS))
    with support.serve_in_thread(create_app(registry, executor, settings)) as url:
        yield url
    executor.close()


def _gated_mcp_canvas(url: str) -> dict[str, Any]:
    entry = {"id": 3, "name": "Calc", "type": "mcp_server", "enabled": True,
             "config": {"serverId": "web", "operationName": "add", "serverUrl": url}}  # fmt: skip
    return chain(
        node("n0", "HITL", "Gate", reviewTitle="Go on?"),
        node("n1", "Agent", "Adder", tools=[entry], model={"modelName": "rehearsal"}),
        workflow_id="w_gated",
    )


def test_resuming_a_run_does_not_store_the_mcp_server_its_canvas_binds(
    api: str, registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    body = {**_gated_mcp_canvas(mcp_server.url), "user_input": 'Add {"a": 2, "b": 5}', "run_id": "run_ide"}
    with httpx.Client(base_url=api, timeout=300, headers=IDE) as http:
        with http.stream("POST", "/workflows/run", json=body) as stream:
            assert stream.status_code == 200
            frames = list(sse_frames(stream.iter_lines()))
        assert frames[-1]["data"]["status"] == "interrupted", frames[-1]
        assert registry.list_mcp_servers() == {}  # bound for the run only, as the start should
        resumed = http.post("/workflows/runs/run_ide/resume", json={"decision": "approve"})
    assert resumed.status_code == 200, resumed.text
    stored = Path(registry.storage.directory) / "mcp_servers.json"  # type: ignore[union-attr]
    kept = json.loads(stored.read_text()) if stored.exists() else {}
    assert registry.list_mcp_servers() == {} and kept == {}, (
        f"stored by the resume: {kept or registry.list_mcp_servers()}"
    )
