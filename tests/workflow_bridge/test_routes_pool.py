"""Issue 22 finding 6, scaled down: workflow runs over HTTP take their own bounded pool of worker threads
(`ECHO_TOOLS_RUN_SLOTS`), so runs blocked in their tools cannot take the threads the other routes need
(anyio's default pool, cut to 2 threads here as 40 disconnected runs took all 40 on a stock server);
a run beyond the pool is refused with 503 `busy`, and `/tools/health` says `saturated` meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools.test_api_server import sse_frames
from tests.echo_tools.test_api_workflows import WAIT_WORKFLOW

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")


class SmallDefaultPool:
    """The app, served with anyio's default worker-thread pool cut to `tokens` threads."""

    def __init__(self, app: Any, tokens: int) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        anyio.to_thread.current_default_thread_limiter().total_tokens = self.tokens
        await self.app(scope, receive, send)


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setenv("ECHO_TOOLS_RUN_SLOTS", "2")
    registry = support.make_registry(tmp_path / "tools", support.ECHO, support.WAITER)
    executor = ToolExecutor(registry)
    try:
        with support.serve_in_thread(
            SmallDefaultPool(create_app(registry, executor, ApiSettings()), 2)
        ) as url:
            yield url
    finally:
        support.RELEASE.set()  # never leave a waiting tool behind
        executor.close()


def _run(url: str, run_id: str, frames: list[dict[str, Any]]) -> None:
    body = {**WAIT_WORKFLOW, "user_input": "go", "run_id": run_id}
    with (
        httpx.Client(base_url=url, timeout=120) as client,
        client.stream("POST", "/workflows/run", json=body) as s,
    ):
        frames.extend(sse_frames(s.iter_lines()))


@pytest.mark.slow  # whole workflow runs (CrewAI, LangGraph)
def test_runs_filling_their_pool_leave_the_other_routes_answering_and_health_says_saturated(
    server: str,
) -> None:
    support.RELEASE.clear()
    runs: list[threading.Thread] = []
    frames: list[list[dict[str, Any]]] = [[], []]
    try:
        for index in range(2):  # both run slots taken by runs blocked in their tool
            support.ENTERED.clear()
            runs.append(threading.Thread(target=_run, args=(server, f"run_pool_{index}", frames[index])))
            runs[-1].start()
            assert support.ENTERED.wait(120), "the workflow never reached its tool"
        with httpx.Client(base_url=server, timeout=10) as client:
            health = client.get("/tools/health").json()
            assert health["status"] == "saturated"
            assert health["workflow_runs"] == {"slots": 2, "busy": 2, "saturated": True}
            third = client.post("/workflows/run", json={**WAIT_WORKFLOW, "user_input": "go"})
            assert third.status_code == 503, third.text
            assert third.json()["error_type"] == "busy" and "2 workflow run slots" in third.json()["message"]
            # the routes that need anyio's worker threads still answer
            remote = {
                "name": "Remote Echo",
                "description": "An API tool registered while the runs wait",
                "tool_type": "api",
                "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
                "execution_config": {"url": "https://example.com/echo", "method": "POST"},
            }
            registered = client.post("/tools/register", json=remote)
            assert registered.status_code == 200, registered.text
            assert client.post("/tools/invoke/echo", json={"text": "hi"}).json()["output"] == {"echo": "hi"}
            assert client.post("/workflows/compile", json=WAIT_WORKFLOW).status_code == 200
    finally:
        support.RELEASE.set()
        for run in runs:
            run.join(120)
    assert [f[-1]["data"]["status"] for f in frames] == ["completed", "completed"]
    with httpx.Client(base_url=server, timeout=10) as client:
        health = client.get("/tools/health").json()
    assert health["status"] == "healthy" and health["workflow_runs"]["busy"] == 0


@pytest.mark.parametrize("value", ["0", "many", "5000"])
def test_a_run_pool_size_out_of_range_is_refused_naming_the_variable_and_value(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_TOOLS_RUN_SLOTS", value)
    registry = support.make_registry(tmp_path / "tools", support.ECHO)
    with pytest.raises(
        ValueError, match=f"ECHO_TOOLS_RUN_SLOTS must be a whole number from 1 to 1024, got '{value}'"
    ):
        create_app(registry, ToolExecutor(registry), ApiSettings())
