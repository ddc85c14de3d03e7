"""`POST /workflows/compile` of a canvas whose connections form a cycle answers 422 with a diagnostic
naming the cycle (issue 17: the diagnostics list was empty); `echo-tools compile` prints it."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.cli import main
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from echo_tools.settings import ApiSettings

with warnings.catch_warnings():  # crewai's import trips an ImportWarning that filterwarnings=error rejects
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    import workflow_bridge.runner  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

CYCLE = {
    "canvas_nodes": [
        {"id": 1, "type": "Start", "name": "Start", "config": {}},
        {"id": 2, "type": "Agent", "name": "Draft", "config": {"prompt": "write"}},
        {"id": 3, "type": "Agent", "name": "Review", "config": {"prompt": "check"}},
        {"id": 4, "type": "End", "name": "End", "config": {}},
    ],
    "connections": [
        {"id": 10, "from": 1, "to": 2},
        {"id": 11, "from": 2, "to": 3},
        {"id": 12, "from": 3, "to": 2},
        {"id": 13, "from": 3, "to": 4},
    ],
    "workflow_name": "Loop",
    "execution_model": "sequential",
}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    registry: Any = ToolRegistry(storage_dir=tmp_path / "tools")
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, ApiSettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        yield c
    await executor.aclose()


async def test_compile_of_a_cycle_is_422_with_a_diagnostic_naming_the_cycle(client) -> None:
    response = await client.post("/workflows/compile", json=CYCLE)
    assert response.status_code == 422, response.text
    (diagnostic,) = response.json()["diagnostics"]
    assert diagnostic["level"] == "error" and diagnostic["field"] == "connections"
    assert "cycle" in diagnostic["message"]
    assert "'Draft'" in diagnostic["message"] and "'Review'" in diagnostic["message"]
    assert diagnostic["node_id"]


def test_the_compile_command_prints_the_cycle_diagnostic_and_exits_1(capsys, tmp_path) -> None:
    source = tmp_path / "loop.json"
    source.write_text(json.dumps(CYCLE))
    code = main(["--storage", str(tmp_path / "store"), "compile", str(source), "--json"])
    out = capsys.readouterr().out
    assert code == 1
    (diagnostic,) = json.loads(out)["diagnostics"]
    assert "cycle" in diagnostic["message"] and "'Review'" in diagnostic["message"]
