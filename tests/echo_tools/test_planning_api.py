"""`POST /tools/plan` and `GET /tools/graph` on a real app: plans, registered plans, the error contract."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools._api_support import local_tool, make_registry

SAY = local_tool("Say", "echo", {"text": {"type": "string"}}, tool_id="say", capabilities=["speak"])
SHOUT = local_tool(
    "Shout", "echo", {"text": {"type": "string"}}, tool_id="shout", capabilities=["speak"], side_effect="pure"
)
SUM = local_tool(
    "Summer", "add", {"a": {"type": "number"}, "b": {"type": "number"}}, tool_id="summer",
    capabilities=["sum"], dependencies=["say"],
)  # fmt: skip


@pytest.fixture
def registry(tmp_path: Path) -> Any:
    return make_registry(tmp_path / "tools", SAY, SHOUT, SUM)


@pytest.fixture
def client(registry: Any) -> Iterator[TestClient]:
    executor = ToolExecutor(registry)
    with TestClient(create_app(registry, executor, ApiSettings()), base_url="http://127.0.0.1") as client:
        yield client
    executor.close()


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert {"error_type", "message", "tool_id", "field"} <= set(body)
    return body  # type: ignore[no-any-return]


def test_a_plan_maps_capabilities_to_tools_with_fallbacks(client: TestClient) -> None:
    response = client.post("/tools/plan", json={"capabilities": ["speak"], "inputs": {"text": "hi"}})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["steps"] == [
        {
            "id": "s1",
            "tool": "shout",
            "input": {"text": "$.input.text"},
            "depends_on": [],
            "fallback": ["say"],
        }
    ]
    assert body["output"] == "$.steps.s1.output" and "registered" not in body


def test_dependencies_are_planned_first(client: TestClient) -> None:
    body = client.post("/tools/plan", json={"capabilities": ["sum"], "inputs": {"a": 1, "b": 2}}).json()
    assert [(s["tool"], s["depends_on"]) for s in body["steps"]] == [("say", []), ("summer", ["s1"])]


def test_an_unknown_capability_is_404_naming_it(client: TestClient) -> None:
    body = _error(client.post("/tools/plan", json={"capabilities": ["speek"]}), 404)
    assert body["error_type"] == "not_found" and body["field"] == "capabilities"
    assert "'speek'" in body["message"] and "did you mean 'speak'" in body["message"]


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"capabilities": []}, "body.capabilities"),
        ({"capabilities": [""]}, "body.capabilities.0"),
        ({"capabilities": ["speak"], "inputs": [1]}, "body.inputs"),
        ({"capabilities": ["speak"], "register": {"tool_id": "x"}}, "body.register.name"),
        ({"capabilities": ["speak"], "extra": 1}, "body.extra"),
    ],
)
def test_a_malformed_request_is_422_naming_the_field(client: TestClient, payload: Any, field: str) -> None:
    body = _error(client.post("/tools/plan", json=payload), 422)
    assert body["error_type"] == "validation" and body["field"] == field, body


def test_a_registered_plan_is_a_remote_skill_that_runs(client: TestClient, registry: Any) -> None:
    payload = {
        "capabilities": ["speak"],
        "inputs": {"text": "hi"},
        "register": {"tool_id": "planned_speech", "name": "Planned speech"},
    }
    response = client.post("/tools/plan", json=payload)
    assert response.status_code == 200, response.text
    registered = response.json()["registered"]
    assert registered["tool_id"] == "planned_speech" and registered["tool_type"] == "skill"
    assert registered["status"] == "active"
    stored = registry.require("planned_speech")
    assert stored.source.value == "remote"
    assert stored.execution_config["steps"][0]["fallback"] == ["say"]
    ran = client.post("/tools/invoke/id/planned_speech", json={"text": "hello"})
    assert ran.status_code == 200, ran.text
    assert ran.json()["output"] == {"echo": "hello"}


def test_a_plan_may_not_replace_a_tool_the_host_registered(client: TestClient, registry: Any) -> None:
    payload = {"capabilities": ["sum"], "register": {"tool_id": "shout", "name": "Shout again"}}
    body = _error(client.post("/tools/plan", json=payload), 409)
    assert "'shout'" in body["message"], body
    assert registry.require("shout").tool_type.value == "local"


def test_the_graph_lists_tools_and_dependency_edges(client: TestClient, registry: Any) -> None:
    response = client.get("/tools/graph")
    assert response.status_code == 200, response.text
    assert response.json() == {"nodes": ["say", "shout", "summer"], "edges": [["say", "summer"]]}
    assert registry.graph() == response.json()
