"""Issue 22's reproductions, as an attacker holding a restricted key would try them against a server with
three principals (the operator, an IDE key with `invoke`+`run` and no `fs:write`, a `team` key that may
register, import and store credentials). Each failed open before the gate; each must now be refused,
naming the action, the principal or the owner, with nothing stored changed."""

from __future__ import annotations

import json
import warnings
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.credentials import SECRET_KEY_ENV, new_key
from echo_tools.executor import ToolExecutor
from echo_tools.gate import hash_key, principals_from
from echo_tools.models import ToolDef
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools.test_api_server import sse_frames

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    import workflow_bridge.runner  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

OPERATOR = {"X-API-Key": "operator-key-0123456789"}
IDE = {"X-API-Key": "ide-key-0123456789"}
TEAM = {"X-API-Key": "team-key-0123456789"}
PRINCIPALS = {
    "principals": [
        {"name": "ide", "key_sha256": hash_key(IDE["X-API-Key"]), "actions": ["invoke", "run"],
         "permissions": ["net:outbound"]},
        {"name": "team", "key_sha256": hash_key(TEAM["X-API-Key"]),
         "actions": ["invoke", "register", "import", "credentials", "compile"]},
    ]
}  # fmt: skip
SETTINGS = ApiSettings(api_key=OPERATOR["X-API-Key"], principals=principals_from(PRINCIPALS))

GUARDED_WORKFLOW = {
    "workflow": {
        "workflow_id": "wf_guarded",
        "name": "Guarded",
        "execution_model": "sequential",
        "agents": ["agt_g"],
        "connections": [],
    },
    "agents": {
        "agt_g": {
            "agent_id": "agt_g",
            "name": "Writer",
            "role": "Writer",
            "goal": "write",
            "prompt": "Call the guarded tool.",
            "tools": ["tool_guarded"],
            "metadata": {"node_type": "Agent"},
        }
    },
}


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    return support.make_registry(tmp_path / "tools", support.ECHO, support.GUARDED)


@pytest.fixture
async def client(registry: Any) -> AsyncIterator[httpx.AsyncClient]:
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, SETTINGS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        yield c
    await executor.aclose()


@pytest.fixture
def server(registry: Any) -> Iterator[str]:
    executor = ToolExecutor(registry)
    with support.serve_in_thread(create_app(registry, executor, SETTINGS)) as url:
        yield url
    executor.close()


def run_frames(url: str, body: dict[str, Any], headers: dict[str, str]) -> list[dict[str, Any]]:
    with httpx.Client(base_url=url, timeout=120, headers=headers) as http:
        with http.stream("POST", "/workflows/run", json=body) as stream:
            assert stream.status_code == 200
            return list(sse_frames(stream.iter_lines()))


# -- 1. permissions on every path; the credential routes gated ------------------------------------------


def test_a_workflow_run_gets_the_principal_s_ceiling_not_the_canvas_s(server: str) -> None:
    body = {**GUARDED_WORKFLOW, "user_input": 'write {"text": "pwned"}', "run_id": "run-ceiling"}
    frames = run_frames(server, body, IDE)
    tool_frames = [f["data"] for f in frames if str(f["event"]).startswith("tool.")]
    assert tool_frames, frames
    assert not [f for f in tool_frames if f["type"] == "tool.completed"], "the guarded tool ran"
    refused = [f for f in tool_frames if f["type"] == "tool.failed"]
    assert refused and refused[0]["error_type"] == "permission_denied"
    assert "fs:write" in refused[0]["error"]


def test_the_operator_s_run_of_the_same_workflow_calls_the_tool(server: str) -> None:
    body = {**GUARDED_WORKFLOW, "user_input": 'write {"text": "fine"}'}
    frames = run_frames(server, body, OPERATOR)
    completed = [f["data"] for f in frames if f["event"] == "tool.completed"]
    assert completed and completed[0]["output"] == {"echo": "fine"}


async def test_a_key_without_the_credentials_action_cannot_touch_credentials(
    client: httpx.AsyncClient, registry: Any
) -> None:
    registry.credentials.set("ops", {"type": "bearer", "token": "operator-secret-1"})
    for request in (
        client.post("/tools/credentials", json={"name": "ops", "credential": {"type": "bearer", "token": "x"}},
                    headers=IDE),
        client.delete("/tools/credentials/ops", headers=IDE),
        client.get("/tools/credentials", headers=IDE),
    ):  # fmt: skip
        response = await request
        assert response.status_code == 403, response.text
        assert "'ide'" in response.json()["message"] and "'credentials'" in response.json()["message"]
    assert registry.credentials.owner_of("ops") is None and "ops" in registry.credentials


async def test_another_principal_s_credential_can_be_neither_replaced_nor_deleted(
    client: httpx.AsyncClient, registry: Any
) -> None:
    registry.credentials.set("ops", {"type": "bearer", "token": "operator-secret-1", "hosts": ["a.example"]})
    before = registry.credentials.hosts_of("ops")
    replaced = await client.post(
        "/tools/credentials",
        json={"name": "ops", "credential": {"type": "bearer", "token": "mine"}},
        headers=TEAM,
    )
    assert replaced.status_code == 409 and replaced.json()["error_type"] == "owned"
    assert "'operator'" in replaced.json()["message"] and "'team'" in replaced.json()["message"]
    deleted = await client.delete("/tools/credentials/ops", headers=TEAM)
    assert deleted.status_code == 409
    assert "ops" in registry.credentials and registry.credentials.hosts_of("ops") == before
    own = await client.post(
        "/tools/credentials",
        json={"name": "teams", "credential": {"type": "bearer", "token": "t"}},
        headers=TEAM,
    )
    assert own.status_code == 200 and registry.credentials.owner_of("teams") == "team"
    assert (await client.delete("/tools/credentials/teams", headers=TEAM)).status_code == 200


# -- 2. a secret goes only to its hosts ------------------------------------------------------------------


def _spec(base: str) -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "Shop", "version": "1"},
        "servers": [{"url": base}],
        "paths": {
            "/items": {"get": {"operationId": "listItems", "responses": {"200": {"description": "ok"}}}}
        },
    }


async def test_an_import_naming_a_credential_that_does_not_exist_is_refused(
    client: httpx.AsyncClient, registry: Any
) -> None:
    body = {"spec": _spec("https://evil.example"), "provider": "shop", "credential": "later"}
    response = await client.post("/tools/import/openapi", json=body, headers=TEAM)
    assert response.status_code == 403 and response.json()["field"] == "credential"
    assert "'later' does not exist" in response.json()["message"]
    assert registry.list_by_tags(["provider:shop"]) == []


async def test_an_import_may_not_lend_itself_another_principal_s_credential(
    client: httpx.AsyncClient, registry: Any
) -> None:
    registry.credentials.set(
        "ops", {"type": "bearer", "token": "operator-secret-1", "hosts": ["evil.example"]}
    )
    body = {"spec": _spec("https://evil.example"), "provider": "shop", "credential": "ops"}
    response = await client.post("/tools/import/openapi", json=body, headers=TEAM)
    assert response.status_code == 409 and response.json()["error_type"] == "owned"
    assert registry.list_by_tags(["provider:shop"]) == []


async def test_a_credential_without_hosts_goes_only_to_the_host_it_was_first_bound_to(registry: Any) -> None:
    store = registry.credentials
    store.set("ops", {"type": "bearer", "token": "operator-secret-1"})
    first = await store.apply("ops", "https://api.example/v1/items")
    assert first.headers == {"Authorization": "Bearer operator-secret-1"}
    assert store.hosts_of("ops") == ["api.example"]
    with pytest.raises(Exception, match="may be sent to hosts") as refused:
        await store.apply("ops", "https://evil.example/capture", tool_id="shop_list_items")
    assert refused.value.field == "execution_config.credential"  # type: ignore[attr-defined]
    store.set("ops", {"type": "bearer", "token": "rotated-secret-2"})  # replacing keeps the bound host
    assert store.hosts_of("ops") == ["api.example"]


async def test_an_imported_tool_is_checked_against_the_credential_s_hosts_on_every_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from echo_tools.egress import EgressPolicy
    from echo_tools.openapi import import_openapi
    from echo_tools.registry import ToolRegistry

    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    registry = ToolRegistry(storage_dir=tmp_path / "local", egress=EgressPolicy.local())
    registry.credentials.set(
        "shopkey", {"type": "bearer", "token": "operator-secret-1", "hosts": ["127.0.0.2"]}
    )
    (tool,) = import_openapi(registry, _spec("http://127.0.0.1:9"), provider="shop", credential="shopkey")
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    result = await executor.invoke(tool.tool_id, {})
    await executor.aclose()
    assert not result.success and result.error_field == "execution_config.credential"
    assert "may be sent to hosts ['127.0.0.2'] only" in (result.error or "")


# -- 3. ownership: tools, providers, compile stores nothing -----------------------------------------------


async def test_another_principal_s_tool_can_be_neither_replaced_nor_deleted(
    client: httpx.AsyncClient, registry: Any
) -> None:
    mine = {"tool_id": "ops_echo", "name": "Ops Echo", "tool_type": "api", "description": "the operator's",
            "execution_config": {"url": "https://api.example.com/echo", "method": "GET"}}  # fmt: skip
    assert (await client.post("/tools/register", json=mine, headers=OPERATOR)).status_code == 200
    assert registry.get("ops_echo").owner == "operator"
    taken = {**mine, "description": "now mine"}
    replaced = await client.post("/tools/register", json=taken, headers=TEAM)
    assert replaced.status_code == 409 and replaced.json()["error_type"] == "owned"
    assert replaced.json()["tool_id"] == "ops_echo" and "'operator'" in replaced.json()["message"]
    assert (await client.delete("/tools/ops_echo", headers=TEAM)).status_code == 409
    assert registry.get("ops_echo").description == mine["description"]
    own = {**mine, "tool_id": "team_echo", "name": "Team Echo"}
    assert (await client.post("/tools/register", json=own, headers=TEAM)).status_code == 200
    assert registry.get("team_echo").owner == "team"
    assert (await client.delete("/tools/team_echo", headers=TEAM)).status_code == 200


async def test_an_import_under_another_principal_s_provider_is_refused(
    client: httpx.AsyncClient, registry: Any
) -> None:
    from echo_tools.openapi import import_openapi

    (ops,) = import_openapi(registry, _spec("https://api.example"), provider="shop")  # the operator's
    body = {"spec": _spec("https://evil.example"), "provider": "shop"}
    response = await client.post("/tools/import/openapi", json=body, headers=TEAM)
    assert response.status_code == 409 and response.json()["field"] == "provider"
    stored = registry.get(ops.tool_id)
    assert (
        stored.execution_config["url"].startswith("https://api.example") and stored.status.value == "active"
    )
    fresh = await client.post("/tools/import/openapi", json={**body, "provider": "teamshop"}, headers=TEAM)
    assert fresh.status_code == 200
    assert {t.owner for t in registry.list_by_tags(["provider:teamshop"])} == {"team"}


async def test_compile_never_adds_the_mcp_server_a_canvas_names(
    client: httpx.AsyncClient, registry: Any
) -> None:
    from tests.workflow_bridge._mapper_support import chain, node

    entry = {"id": 3, "name": "Calc", "type": "mcp_server", "enabled": True,
             "config": {"serverId": "evil", "operationName": "add", "serverUrl": "http://127.0.0.1:9/mcp"}}  # fmt: skip
    canvas = chain(
        node("n1", "Agent", "Adder", tools=[entry], model={"modelName": "rehearsal"}), workflow_id="w"
    )
    for headers in (TEAM, OPERATOR):  # bound for the compile only, under the egress policy (no loopback)
        response = await client.post("/workflows/compile", json=canvas, headers=headers)
        assert response.status_code == 422, response.text
        assert "config.serverUrl 'http://127.0.0.1:9/mcp' is refused" in json.dumps(response.json())
    assert registry.list_mcp_servers() == {}
    assert not registry.list_by_type("mcp")


def test_an_owner_is_a_plain_field_of_a_tool() -> None:
    assert ToolDef(name="x").owner is None
    assert ToolDef(name="x", owner="team").to_storage_dict()["owner"] == "team"


# -- 5. one budget for the whole request -------------------------------------------------------------------


def _skill(tool_id: str, inner: str, width: int) -> dict[str, Any]:
    steps = [{"id": f"s{i}", "tool": inner, "input": {"text": "$.input.text"}} for i in range(width)]
    return {
        "tool_id": tool_id,
        "name": tool_id,
        "tool_type": "skill",
        "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        "execution_config": {"steps": steps},
        "timeout_ms": 60_000,
    }


async def test_a_64_wide_fan_out_of_skills_is_refused_within_one_step_of_the_limit(registry: Any) -> None:
    registry.register(_skill("inner_wide", "tool_echo", 64))
    registry.register(_skill("outer_wide", "inner_wide", 64))  # 64 x 64 = 4,096 calls of one request
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, SETTINGS)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        response = await c.post("/tools/invoke/outer_wide", json={"text": "x"}, headers=IDE)
        health = await c.get("/tools/health")
    await executor.aclose()
    assert response.status_code == 429, response.text
    body = response.json()
    assert body["error_type"] == "budget" and body["field"] == "budget.max_fanout"
    assert "max_fanout=64" in body["message"]
    echo = executor.metrics().get("tool_echo", {})
    started = echo.get("calls", 0)
    assert started <= 64, f"{started} inner calls were started past a fan-out of 64"
    assert health.status_code == 200


async def test_the_request_s_call_count_is_shared_by_every_nested_call(registry: Any) -> None:
    from echo_tools.gate import Budget, BudgetMeter
    from echo_tools.models import ToolContext

    registry.register(_skill("inner_eight", "tool_echo", 8))
    registry.register(_skill("outer_eight", "inner_eight", 8))  # 1 + 8 + 64 calls
    executor = ToolExecutor(registry)
    meter = BudgetMeter(Budget(max_calls=40))
    result = await executor.invoke("outer_eight", {"text": "x"}, ToolContext(budget=meter))
    await executor.aclose()
    assert not result.success and result.error_type == "budget"
    assert result.error_field == "budget.max_calls" and "max_calls=40" in (result.error or "")
    assert meter.calls == 40 and meter.in_flight == 0


# -- a canvas agent's own model URL: the operator's key never goes to the caller's server ----------------


def _with_model_url(url: str) -> dict[str, Any]:
    agent = {**GUARDED_WORKFLOW["agents"]["agt_g"], "llm": {"model": "gpt-4o-mini", "base_url": url}}
    return {**GUARDED_WORKFLOW, "agents": {"agt_g": agent}, "user_input": 'write {"text": "x"}'}


def test_a_canvas_model_url_from_a_restricted_key_is_refused_and_never_sent_the_operator_s_key(
    server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.workflow_bridge._openai_server import scripted_openai_server

    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator-secret-0123")
    with scripted_openai_server(["Done."]) as caller_s_server:
        frames = run_frames(server, _with_model_url(caller_s_server.url), IDE)
    assert caller_s_server.requests == []  # the server never called the caller's URL, key or no key
    text = json.dumps(frames)
    assert "run.failed" in text and "llm.base_url" in text and "'ide'" in text
    assert "sk-operator-secret" not in text


def test_the_operator_may_point_an_agent_at_a_model_url(server: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.workflow_bridge._openai_server import scripted_openai_server

    monkeypatch.setenv("OPENAI_API_KEY", "sk-operator-secret-0123")
    with scripted_openai_server(["All done."]) as model_server:
        frames = run_frames(server, _with_model_url(model_server.url), OPERATOR)
    assert model_server.requests and model_server.requests[0]["_authorization"].endswith(
        "sk-operator-secret-0123"
    )
    assert frames[-1]["event"] == "run.completed", frames[-1]
