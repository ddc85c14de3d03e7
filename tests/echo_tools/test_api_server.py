"""The HTTP API through a real uvicorn server on 127.0.0.1: routes, API key, and the live event stream."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools._api_support import ADD, ECHO, EXPLODE, make_registry, serve_in_thread

KEY = "server-test-key-1"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Any]]:
    registry = make_registry(tmp_path / "tools", ECHO, ADD, EXPLODE)
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, ApiSettings(api_key=KEY, sse_ping_seconds=0.5))
    with serve_in_thread(app) as url:
        yield url, registry
    executor.close()


def sse_frames(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Parse Server-Sent Events lines into `{event, id, data}` frames (comments skipped)."""
    import json

    frame: dict[str, Any] = {}
    for line in lines:
        if not line:
            if frame:
                yield frame
                frame = {}
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(": ")
        frame[field] = json.loads(value) if field == "data" else value


def test_routes_answer_through_a_real_server(server: tuple[str, Any]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=10) as client:
        assert client.get("/tools/health").json()["status"] == "healthy"
        assert {t["tool_id"] for t in client.get("/tools/list").json()} == {
            "tool_echo",
            "tool_adder",
            "tool_exploder",
        }
        result = client.post("/tools/invoke/adder", json={"a": 40, "b": 2}).json()
        assert result["success"] and result["output"] == {"sum": 42}
        failed = client.post("/tools/invoke/exploder", json={"text": "x"})
        assert failed.status_code == 502 and failed.json()["error_type"] == "execution"
        assert client.post("/tools/invoke/adder", json={"a": "forty", "b": 2}).json()["field"] == "input.a"


def test_the_real_server_refuses_requests_without_the_key(server: tuple[str, Any]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, timeout=10) as client:
        refused = client.post("/tools/invoke/echo", json={"text": "x"})
        assert refused.status_code == 401
        assert refused.json()["error_type"] == "unauthorized"
        assert client.get("/tools/health").status_code == 200


def test_the_event_stream_delivers_the_events_of_an_invoke_of_its_run(server: tuple[str, Any]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=10) as client:
        params = {"run_id": "run-1", "max_events": 2}
        with client.stream("GET", "/tools/events", params=params) as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            frames = sse_frames(stream.iter_lines())
            assert next(frames)["event"] == "ready"  # subscribed: events from now on reach this stream
            other = client.post("/tools/invoke/echo", params={"run_id": "run-2"}, json={"text": "not mine"})
            assert other.status_code == 200
            mine = client.post(
                "/tools/invoke/echo", params={"run_id": "run-1", "agent_id": "agt_1"}, json={"text": "mine"}
            )
            assert mine.status_code == 200
            events = [next(frames), next(frames)]
    assert [e["event"] for e in events] == ["tool.invoked", "tool.completed"]
    invoked, completed = (e["data"] for e in events)
    assert invoked["run_id"] == completed["run_id"] == "run-1"
    assert invoked["agent_id"] == "agt_1"
    assert invoked["input"] == {"text": "mine"}
    assert completed["output"] == {"echo": "mine"}
    assert events[1]["id"] == completed["event_id"]


def test_the_event_stream_without_a_filter_sees_failures_and_registrations(server: tuple[str, Any]) -> None:
    url, _ = server
    with httpx.Client(base_url=url, headers={"X-API-Key": KEY}, timeout=10) as client:
        with client.stream("GET", "/tools/events", params={"max_events": 3}) as stream:
            frames = sse_frames(stream.iter_lines())
            assert next(frames)["event"] == "ready"
            remote = {
                "name": "Echo Two",
                "tool_type": "api",
                "execution_config": {"url": "https://api.example.com/echo"},
            }
            assert client.post("/tools/register", json=remote).status_code == 200
            client.post("/tools/invoke/exploder", json={"text": "boom"})
            kinds = [next(frames)["event"] for _ in range(3)]
    assert kinds == ["tool.registered", "tool.invoked", "tool.failed"]
