"""The /tools routes through httpx.ASGITransport: EchoAI's paths and shapes, the error contract, security."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from echo_tools.api import create_app, make_router
from echo_tools.errors import ToolConfigError
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools._api_support import ADD, ECHO, EXPLODE, GUARDED, MODULE, SLEEPY, make_registry

LIST_KEYS = {"tool_id", "name", "description", "tool_type", "status", "version", "tags"}
ERROR_KEYS = {"error_type", "message", "tool_id", "field"}


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    return tmp_path / "store" / "tools"


@pytest.fixture
def registry(storage: Path) -> Any:
    return make_registry(storage, ECHO, ADD, EXPLODE, SLEEPY, GUARDED)


@pytest.fixture
async def executor(registry: Any) -> AsyncIterator[ToolExecutor]:
    executor = ToolExecutor(registry)
    yield executor
    await executor.aclose()


def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1")


@pytest.fixture
async def client(registry: Any, executor: ToolExecutor) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(create_app(registry, executor, ApiSettings())) as client:
        yield client


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def assert_error(response: httpx.Response, status: int, error_type: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert ERROR_KEYS <= set(body)
    assert body["error_type"] == error_type
    assert body["message"]
    return body


# -- EchoAI's routes and shapes ------------------------------------------------------------------------


async def test_list_returns_echoai_list_items(client: httpx.AsyncClient) -> None:
    response = await client.get("/tools/list")
    assert response.status_code == 200
    items = response.json()
    assert [i["tool_id"] for i in items] == sorted(i["tool_id"] for i in items)
    assert all(set(i) == LIST_KEYS for i in items)
    echo = next(i for i in items if i["tool_id"] == "tool_echo")
    assert echo == {
        "tool_id": "tool_echo",
        "name": "Echo",
        "description": "Test tool Echo",
        "tool_type": "local",
        "status": "active",
        "version": "1.0",
        "tags": ["test", "source:python"],  # registered in-process: source `python`, tagged so
    }


async def test_list_by_type_filters_and_an_unknown_type_is_422_naming_it(client: httpx.AsyncClient) -> None:
    local = await client.get("/tools/list/type/LOCAL")
    assert local.status_code == 200 and len(local.json()) == 5
    assert (await client.get("/tools/list/type/mcp")).json() == []
    body = assert_error(await client.get("/tools/list/type/robot"), 422, "validation")
    assert "'robot'" in body["message"]


async def test_search_matches_every_word(client: httpx.AsyncClient) -> None:
    found = (await client.get("/tools/search", params={"q": "test adder"})).json()
    assert [t["tool_id"] for t in found] == ["tool_adder"]


async def test_health_is_reachable_even_with_a_tool_called_health(
    client: httpx.AsyncClient, registry: Any
) -> None:
    registry.register({**ECHO, "name": "Health", "tool_id": "health"})
    response = await client.get("/tools/health")
    assert response.status_code == 200
    assert response.json()["status"] == "healthy"
    assert response.json()["tool_count"] == 6


async def test_get_tool_returns_the_full_definition_by_id_or_name(client: httpx.AsyncClient) -> None:
    by_id = (await client.get("/tools/tool_adder")).json()
    by_name = (await client.get("/tools/Adder")).json()
    assert by_id == by_name
    assert by_id["execution_config"] == {"module": MODULE, "function": "add"}
    assert by_id["input_schema"]["required"] == ["a", "b"]


async def test_an_unknown_tool_is_404_with_the_contract_body(client: httpx.AsyncClient) -> None:
    body = assert_error(await client.get("/tools/tool_nothing"), 404, "not_found")
    assert "'tool_nothing'" in body["message"]
    assert_error(await client.post("/tools/invoke/nothing", json={}), 404, "not_found")
    assert_error(await client.post("/tools/invoke/id/tool_nothing", json={}), 404, "not_found")
    assert_error(await client.post("/tools/validate/tool_nothing", json={}), 404, "not_found")
    assert_error(await client.delete("/tools/tool_nothing"), 404, "not_found")


async def test_invoke_by_name_returns_the_tool_result(client: httpx.AsyncClient) -> None:
    response = await client.post("/tools/invoke/adder", json={"a": 2, "b": 3.5})
    assert response.status_code == 200
    result = response.json()
    assert result["success"] is True
    assert result["output"] == {"sum": 5.5}
    assert result["tool_id"] == "tool_adder"
    assert result["attempts"] == 1
    assert set(result) >= {"tool_id", "name", "success", "output", "error", "error_type", "duration_ms"}


async def test_invoke_by_id_takes_only_the_exact_id(client: httpx.AsyncClient) -> None:
    ok = await client.post("/tools/invoke/id/tool_echo", json={"text": "hi"})
    assert ok.json()["output"] == {"echo": "hi"}
    assert_error(await client.post("/tools/invoke/id/Echo", json={"text": "hi"}), 404, "not_found")


async def test_invalid_input_is_422_naming_the_field_and_the_value(client: httpx.AsyncClient) -> None:
    body = assert_error(await client.post("/tools/invoke/adder", json={"a": 1, "b": "x"}), 422, "validation")
    assert body["field"] == "input.b"
    assert "'x'" in body["message"] or '"x"' in body["message"]
    assert body["tool_id"] == "tool_adder"
    assert body["result"]["success"] is False


async def test_a_body_that_is_not_an_object_is_422(client: httpx.AsyncClient) -> None:
    body = assert_error(await client.post("/tools/invoke/echo", json=[1, 2]), 422, "validation")
    assert body["field"].startswith("body")
    broken = await client.post(
        "/tools/invoke/echo", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert_error(broken, 422, "validation")


async def test_a_tool_failure_is_502_and_a_timeout_is_504(client: httpx.AsyncClient) -> None:
    failed = assert_error(
        await client.post("/tools/invoke/exploder", json={"text": "boom"}), 502, "execution"
    )
    assert "tool exploded on 'boom'" in failed["message"]
    timed_out = assert_error(await client.post("/tools/invoke/sleepy", json={"seconds": 1}), 504, "timeout")
    assert timed_out["tool_id"] == "tool_sleepy"


async def test_a_permission_the_server_does_not_grant_is_403(registry: Any, executor: ToolExecutor) -> None:
    app = create_app(registry, executor, ApiSettings(granted_permissions=("net:outbound",)))
    async with client_for(app) as client:
        body = assert_error(
            await client.post("/tools/invoke/guarded", json={"text": "x"}), 403, "permission_denied"
        )
        assert "fs:write" in body["message"]
        allowed = await client.post("/tools/invoke/echo", json={"text": "x"})
        assert allowed.status_code == 200


async def test_a_disabled_tool_is_403(client: httpx.AsyncClient, registry: Any) -> None:
    registry.register({**ECHO, "status": "disabled"})
    assert_error(await client.post("/tools/invoke/echo", json={"text": "x"}), 403, "disabled")


async def test_validate_answers_valid_or_the_reasons(client: httpx.AsyncClient) -> None:
    ok = (await client.post("/tools/validate/tool_adder", json={"a": 1, "b": 2})).json()
    assert ok == {"valid": True, "tool_id": "tool_adder", "message": "Input is valid"}
    bad = (await client.post("/tools/validate/tool_adder", json={"a": 1})).json()
    assert bad["valid"] is False and bad["tool_id"] == "tool_adder"
    assert 'input: "b" is a required property' in bad["error"]


# -- registration ------------------------------------------------------------------------------------


SHOUT = {
    "name": "Shout",
    "tool_id": "tool_shout",
    "tool_type": "api",
    "execution_config": {"url": "https://api.example.com/shout", "method": "POST"},
}


async def test_register_stores_the_tool_and_a_name_clash_is_409(
    client: httpx.AsyncClient, storage: Path
) -> None:
    tool = SHOUT
    response = await client.post("/tools/register", json=tool)
    assert response.status_code == 200
    assert response.json()["tool_id"] == "tool_shout" and response.json()["status"] == "registered"
    assert response.json()["source"] == "remote"
    assert (storage / "tool_shout.json").is_file()
    clash = assert_error(
        await client.post("/tools/register", json={**tool, "tool_id": "tool_other", "name": "SHOUT"}),
        409,
        "conflict",
    )
    assert "'SHOUT'" in clash["message"]
    assert not (storage / "tool_other.json").exists()


async def test_registering_os_getcwd_format_map_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, storage: Path
) -> None:
    before = files_in(storage.parent)
    evil = {"name": "Leak", "execution_config": {"module": "os", "class": "getcwd", "method": "format_map"}}
    body = assert_error(await client.post("/tools/register", json=evil), 403, "permission_denied")
    assert body["field"] == "execution_config.module"
    assert "'os'" in body["message"]
    assert files_in(storage.parent) == before
    assert_error(await client.post("/tools/invoke/leak", json={}), 404, "not_found")


@pytest.mark.parametrize("tool_type", ["crewai", "langchain"])
async def test_python_tools_outside_the_allowed_modules_are_refused(
    client: httpx.AsyncClient, storage: Path, tool_type: str
) -> None:
    before = files_in(storage.parent)
    tool = {
        "name": "Shell",
        "tool_type": tool_type,
        "execution_config": {"module": "subprocess", "class": "Popen"},
    }
    assert_error(await client.post("/tools/register", json=tool), 403, "permission_denied")
    assert files_in(storage.parent) == before


@pytest.mark.parametrize("tool_id", ["../../pwned", "/tmp/pwned", "..", "a/b"])
async def test_a_path_as_tool_id_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, storage: Path, tmp_path: Path, tool_id: str
) -> None:
    before = files_in(tmp_path)
    body = assert_error(
        await client.post("/tools/register", json={**ECHO, "tool_id": tool_id}), 422, "validation"
    )
    assert body["field"] == "body.tool_id"
    assert repr(tool_id) in body["message"]
    assert files_in(tmp_path) == before
    assert not Path("/tmp/pwned.json").exists()


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/latest",
        "http://127.0.0.1:8080/admin",
        "http://10.0.0.5/internal",
        "file:///etc/passwd",
    ],
)
async def test_an_api_tool_breaking_the_egress_policy_is_refused(
    client: httpx.AsyncClient, storage: Path, url: str
) -> None:
    before = files_in(storage.parent)
    tool = {"name": "Metadata", "tool_type": "api", "execution_config": {"url": url, "method": "GET"}}
    response = await client.post("/tools/register", json=tool)
    assert response.status_code in (403, 422), response.text
    assert response.json()["field"] == "execution_config.url"
    assert files_in(storage.parent) == before


async def test_delete_removes_the_tool_and_its_file(client: httpx.AsyncClient, storage: Path) -> None:
    assert (await client.post("/tools/register", json=SHOUT)).status_code == 200
    assert (storage / "tool_shout.json").is_file()
    response = await client.delete("/tools/tool_shout")
    assert response.status_code == 200 and response.json()["status"] == "deleted"
    assert not (storage / "tool_shout.json").exists()
    assert_error(await client.get("/tools/tool_shout"), 404, "not_found")
    # a tool the host application registered in-process is not the HTTP caller's to delete
    body = assert_error(await client.delete("/tools/tool_adder"), 409, "read_only")
    assert body["field"] == "tool_id" and "'python'" in body["message"]
    assert (storage / "tool_adder.json").is_file()


async def test_discover_registers_the_manifests_of_the_discovery_folders(tmp_path: Path) -> None:
    from echo_tools.registry import ToolRegistry

    manifests = tmp_path / "manifests"
    (manifests / "echo").mkdir(parents=True)
    (manifests / "echo" / "tool_manifest.json").write_text(json.dumps(ECHO))
    (manifests / "broken").mkdir()
    (manifests / "broken" / "tool_manifest.json").write_text("{not json")
    registry = ToolRegistry(tmp_path / "store", discovery_dirs=[manifests], allowed_modules=(MODULE,))
    executor = ToolExecutor(registry)
    async with client_for(create_app(registry, executor)) as client:
        body = (await client.post("/tools/discover")).json()
    await executor.aclose()
    assert body["status"] == "success"
    assert body["discovered_count"] == 1 and body["tools"] == ["tool_echo"]
    assert any("broken" in p for p in body["problems"])


async def test_cache_clear_answers_success_and_tools_still_run(client: httpx.AsyncClient) -> None:
    await client.post("/tools/invoke/echo", json={"text": "a"})
    cleared = await client.post("/tools/cache/clear")
    assert cleared.json()["status"] == "success"
    assert (await client.post("/tools/invoke/echo", json={"text": "b"})).json()["output"] == {"echo": "b"}


# -- agents ------------------------------------------------------------------------------------------


async def test_agent_route_reads_the_agent_json_and_returns_its_active_tools(
    registry: Any, executor: ToolExecutor, tmp_path: Path
) -> None:
    agents = tmp_path / "agents"
    agents.mkdir()
    registry.register({**EXPLODE, "status": "disabled"})
    agent = {
        "agent_id": "agt_0a1b",
        "name": "Helper",
        "tools": ["tool_echo", "Adder", "tool_exploder", "web_fetch"],
    }
    (agents / "agt_0a1b.json").write_text(json.dumps(agent))
    (tmp_path / "secret.json").write_text(json.dumps({"tools": ["tool_echo"]}))
    async with client_for(create_app(registry, executor, ApiSettings(agents_dir=agents))) as client:
        body = (await client.get("/tools/agent/agt_0a1b")).json()
        assert [t["tool_id"] for t in body["tools"]] == ["tool_echo", "tool_adder"]
        assert body["unresolved"] == ["tool_exploder", "web_fetch"]
        assert body["agent_name"] == "Helper"
        assert_error(await client.get("/tools/agent/agt_ffff"), 404, "not_found")
        traversal = await client.get("/tools/agent/..%2Fsecret")
        assert traversal.status_code in (404, 422)
        dotted = assert_error(await client.get("/tools/agent/agt_1.json"), 422, "validation")
        assert dotted["field"] == "path.agent_id"


async def test_agent_route_without_an_agents_folder_is_404(client: httpx.AsyncClient) -> None:
    body = assert_error(await client.get("/tools/agent/agt_0a1b"), 404, "not_found")
    assert "no agents folder" in body["message"]


# -- metrics -----------------------------------------------------------------------------------------


async def test_metrics_are_prometheus_text_with_per_tool_counts(client: httpx.AsyncClient) -> None:
    await client.post("/tools/invoke/echo", json={"text": "a"})
    await client.post("/tools/invoke/exploder", json={"text": "a"})
    response = await client.get("/tools/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    lines = response.text.splitlines()
    assert 'echo_tools_tool_calls_total{tool_id="tool_echo"} 1' in lines
    assert 'echo_tools_tool_failures_total{tool_id="tool_exploder"} 1' in lines
    assert "# TYPE echo_tools_tool_calls_total counter" in lines
    assert any(
        line.startswith('echo_tools_tool_latency_ms{tool_id="tool_echo",quantile="0.5"}') for line in lines
    )
    assert "echo_tools_tools_registered 5.0" in lines


# -- security ----------------------------------------------------------------------------------------


async def test_the_api_key_is_required_when_configured(registry: Any, executor: ToolExecutor) -> None:
    app = create_app(registry, executor, ApiSettings(api_key="s3cret-key-123"))
    async with client_for(app) as client:
        missing = assert_error(await client.get("/tools/list"), 401, "unauthorized")
        assert "X-API-Key" in missing["message"]
        assert_error(
            await client.get("/tools/list", headers={"X-API-Key": "wrong-key-123"}), 401, "unauthorized"
        )
        assert_error(
            await client.post(
                "/tools/invoke/echo", json={"text": "x"}, headers={"Authorization": "Basic abc"}
            ),
            401,
            "unauthorized",
        )
        assert (await client.get("/tools/list", headers={"X-API-Key": "s3cret-key-123"})).status_code == 200
        bearer = {"Authorization": "Bearer s3cret-key-123"}
        assert (
            await client.post("/tools/invoke/echo", json={"text": "x"}, headers=bearer)
        ).status_code == 200
        assert (await client.get("/tools/health")).status_code == 200


def test_a_public_bind_without_an_api_key_is_refused(registry: Any) -> None:
    executor = ToolExecutor(registry)
    with pytest.raises(ToolConfigError, match="'0.0.0.0'") as caught:
        create_app(registry, executor, ApiSettings(host="0.0.0.0"))
    assert caught.value.field == "api_key"
    assert ApiSettings(host="0.0.0.0", api_key="long-enough-key").check().key_required
    assert not ApiSettings(host="127.0.0.1").key_required
    assert not ApiSettings(host="::1").key_required


def test_cors_star_with_credentials_is_refused() -> None:
    with pytest.raises(ToolConfigError, match="'\\*'") as caught:
        ApiSettings(cors_origins=("*",), cors_allow_credentials=True).check()
    assert caught.value.field == "cors_origins"


async def test_cors_is_off_by_default_and_allows_only_configured_origins(
    registry: Any, executor: ToolExecutor
) -> None:
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    async with client_for(create_app(registry, executor)) as client:
        response = await client.options("/tools/invoke/echo", headers=preflight)
        assert "access-control-allow-origin" not in response.headers
    settings = ApiSettings(cors_origins=("https://ide.example",))
    async with client_for(create_app(registry, executor, settings)) as client:
        good = await client.options("/tools/list", headers={**preflight, "Origin": "https://ide.example"})
        assert good.headers["access-control-allow-origin"] == "https://ide.example"
        bad = await client.options("/tools/list", headers=preflight)
        assert "access-control-allow-origin" not in bad.headers


async def test_a_body_over_the_limit_is_413_with_or_without_content_length(
    registry: Any, executor: ToolExecutor, storage: Path
) -> None:
    async with client_for(create_app(registry, executor, ApiSettings(max_body_bytes=4096))) as client:
        big = {"text": "x" * 5000}
        declared = assert_error(await client.post("/tools/invoke/echo", json=big), 413, "too_large")
        assert "4096" in declared["message"]

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"name": "Big", "description": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}'

        streamed = await client.post(
            "/tools/register", content=chunks(), headers={"content-type": "application/json"}
        )
        assert_error(streamed, 413, "too_large")
        assert not (storage / "tool_big.json").exists()
        assert (await client.post("/tools/invoke/echo", json={"text": "small"})).status_code == 200


async def test_unknown_routes_and_methods_answer_the_contract(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/nowhere"), 404, "not_found")
    assert_error(await client.put("/tools/list"), 405, "method_not_allowed")


async def test_the_router_keeps_the_contract_when_mounted_in_another_app(
    registry: Any, executor: ToolExecutor
) -> None:
    gateway = FastAPI()
    gateway.include_router(make_router(registry, executor, ApiSettings(api_key="gateway-key-1")))
    async with client_for(gateway) as client:
        assert_error(await client.get("/tools/list"), 401, "unauthorized")
        key = {"X-API-Key": "gateway-key-1"}
        assert_error(await client.post("/tools/invoke/nothing", json={}, headers=key), 404, "not_found")
        body = assert_error(
            await client.post("/tools/invoke/adder", json={"a": "1"}, headers=key), 422, "validation"
        )
        assert body["field"] == "input.a"
        assert (await client.get("/tools/health")).json()["status"] == "healthy"


def test_importing_echo_tools_does_not_import_fastapi() -> None:
    code = "import echo_tools, sys; print(sorted(m for m in sys.modules if m.split('.')[0] in ('fastapi', 'starlette', 'uvicorn')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
