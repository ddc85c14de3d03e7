"""Stored credentials on HTTP MCP servers: a real streamable-HTTP server on 127.0.0.1 that refuses every
request without its bearer token, api key header, basic password or OAuth2 client-credentials token;
the credential named in the server's config (or a host's `httpx.Auth`) authenticates discovery and calls,
and no secret appears anywhere."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import JsonlEventLog, MCPConnectionError, MemoryEventLog, ToolConfigError, ToolRegistry
from echo_tools.compat.mcp import http_module
from tests.echo_tools._mcp_auth_support import SECRET_VALUES, SECRETS, AuthServer, auth_server
from tests.echo_tools._mcp_support import make_executor, make_registry

pytestmark = pytest.mark.slow


server = auth_server("static")


def credentials(server: AuthServer) -> dict[str, dict[str, Any]]:
    return {
        "m-bearer": {"type": "bearer", "token": SECRETS["AUTH_BEARER"]},
        "m-key": {"type": "api_key", "in": "header", "name": "X-Api-Key", "value": SECRETS["AUTH_API_KEY"]},
        "m-basic": {"type": "basic", "username": SECRETS["AUTH_USER"], "password": SECRETS["AUTH_PASSWORD"]},
        "m-oauth": {
            "type": "oauth2_client_credentials",
            "token_url": f"{server.base}/oauth/token",
            "client_id": SECRETS["AUTH_CLIENT_ID"],
            "client_secret": SECRETS["AUTH_CLIENT_SECRET"],
        },
    }


def registry_with(tmp_path: Path, server: AuthServer, *names: str) -> ToolRegistry:
    registry = make_registry(tmp_path)
    for name in names:
        registry.credentials.set(name, credentials(server)[name])
    return registry


@pytest.mark.parametrize("credential", ["m-bearer", "m-key", "m-basic", "m-oauth"])
async def test_each_credential_type_authenticates_discovery_and_calls(
    tmp_path: Path, key: str, server: AuthServer, credential: str
) -> None:
    registry = registry_with(tmp_path, server, credential)
    tools = registry.add_mcp_server("guarded", {"url": server.url, "credential": credential})
    assert [t.tool_id for t in tools] == ["mcp_guarded_ping"]
    assert registry.mcp_servers["guarded"]["credential"] == credential
    executor = make_executor(registry)
    try:
        result = await executor.invoke("guarded_ping", {})
        assert result.success, result.error
        assert result.output == {"result": "pong"}
    finally:
        await executor.aclose()


async def test_a_credential_authenticates_an_sse_server_too(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry = registry_with(tmp_path, server, "m-basic")
    config = {"url": f"{server.base}/sse", "transport": "sse", "credential": "m-basic"}
    assert [t.tool_id for t in registry.add_mcp_server("old", config)] == ["mcp_old_ping"]
    executor = make_executor(registry)
    try:
        result = await executor.invoke("old_ping", {})
    finally:
        await executor.aclose()
    assert result.success, result.error


def test_without_a_credential_the_server_refuses_and_the_error_says_401(
    tmp_path: Path, server: AuthServer
) -> None:
    registry = make_registry(tmp_path)
    with pytest.raises(MCPConnectionError) as caught:
        registry.add_mcp_server("guarded", {"url": server.url})
    assert "'guarded'" in caught.value.message and "401" in caught.value.message


async def test_an_oauth2_token_is_fetched_once_and_again_after_the_server_revokes_it(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry = registry_with(tmp_path, server, "m-oauth")
    before = server.stats()["token_requests"]
    registry.add_mcp_server("guarded", {"url": server.url, "credential": "m-oauth"})
    executor = make_executor(registry)
    try:
        for _ in range(3):
            assert (await executor.invoke("guarded_ping", {})).success
        assert server.stats()["token_requests"] == before + 1  # cached across discovery and calls
        server.post("/oauth/revoke")
        result = await executor.invoke("guarded_ping", {})
        assert result.success, result.error
        assert server.stats()["token_requests"] == before + 2  # the 401 fetched one fresh token
    finally:
        await executor.aclose()


def test_an_unknown_credential_warns_at_registration_and_the_connection_names_it(
    tmp_path: Path, key: str, server: AuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    registry = make_registry(tmp_path)
    with (
        caplog.at_level(logging.WARNING, logger="echo_tools.mcp"),
        pytest.raises(MCPConnectionError) as caught,
    ):
        registry.add_mcp_server("guarded", {"url": server.url, "credential": "nowhere"})
    assert any("'nowhere'" in r.getMessage() and "does not exist" in r.getMessage() for r in caplog.records)
    assert "credential 'nowhere' does not exist" in caught.value.message
    assert "'guarded'" in caught.value.message
    assert "guarded" not in registry.mcp_servers  # nothing stored


async def test_a_call_after_the_credential_was_removed_fails_naming_it(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry = registry_with(tmp_path, server, "m-bearer")
    registry.add_mcp_server("guarded", {"url": server.url, "credential": "m-bearer"})
    registry.credentials.remove("m-bearer")
    executor = make_executor(registry)
    try:
        result = await executor.invoke("guarded_ping", {})
    finally:
        await executor.aclose()
    assert not result.success
    assert "credential 'm-bearer' does not exist" in (result.error or "")


@pytest.mark.parametrize(
    ("credential", "said"),
    [
        ({"type": "api_key", "in": "query", "name": "key", "value": "q-secret-1"}, "query string"),
        ({"type": "mcp_oauth", "server_url": "http://127.0.0.1:9/mcp"}, "type 'mcp_oauth'"),
    ],
)
def test_a_credential_of_a_type_an_mcp_server_cannot_use_is_refused(
    tmp_path: Path, key: str, server: AuthServer, credential: dict[str, Any], said: str
) -> None:
    registry = make_registry(tmp_path)
    registry.credentials.set("wrong", credential)
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("guarded", {"url": server.url, "credential": "wrong"})
    assert caught.value.field == "mcpServers.guarded.credential"
    assert said in caught.value.message and "'wrong'" in caught.value.message
    assert "q-secret-1" not in caught.value.message


@pytest.mark.parametrize(
    ("config", "field", "value"),
    [
        ({"credential": "no spaces"}, "mcpServers.guarded.credential", "'no spaces'"),
        ({"credential": 7}, "mcpServers.guarded.credential", "7"),
        ({"credential": "a", "oauth": {}}, "mcpServers.guarded.credential", "not both"),
        ({"oauth": {"scope": "x"}}, "mcpServers.guarded.oauth.scope", "'scope'"),
        ({"oauth": {"scopes": 3}}, "mcpServers.guarded.oauth.scopes", "3"),
        ({"oauth": {"redirect_uri": "ftp://x"}}, "mcpServers.guarded.oauth.redirect_uri", "'ftp://x'"),
        ({"oauth": "yes"}, "mcpServers.guarded.oauth", "'yes'"),
    ],
)
def test_bad_auth_config_is_refused_naming_the_field_and_value(
    config: dict[str, Any], field: str, value: str
) -> None:
    registry = make_registry()
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("guarded", {"url": "http://127.0.0.1:9/mcp", **config})
    assert caught.value.field == field
    assert value in caught.value.message


def test_a_stdio_server_cannot_name_a_credential() -> None:
    registry = make_registry()
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("local", {"command": "python", "credential": "m-bearer"})
    assert caught.value.field == "mcpServers.local.credential"
    assert "'env'" in caught.value.message


def test_a_hosts_auth_for_a_stdio_server_is_refused() -> None:
    registry = make_registry()
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("local", {"command": "python"}, auth=httpx.BasicAuth("u", "p"))
    assert caught.value.field == "auth" and "'local'" in caught.value.message


def test_a_hosts_auth_that_is_not_an_httpx_auth_is_refused_naming_its_type(server: AuthServer) -> None:
    registry = make_registry()
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("guarded", {"url": server.url}, auth="Bearer x")
    assert caught.value.field == "auth" and "str" in caught.value.message


def test_a_failing_token_endpoint_names_the_server_and_the_url_but_no_secret(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry = make_registry(tmp_path)
    broken = {**credentials(server)["m-oauth"], "token_url": f"{server.base}/oauth/broken"}
    registry.credentials.set("m-broken", broken)
    with pytest.raises(MCPConnectionError) as caught:
        registry.add_mcp_server("guarded", {"url": server.url, "credential": "m-broken"})
    message = caught.value.message
    assert "'guarded'" in message and f"{server.base}/oauth/broken" in message and "HTTP 500" in message
    assert SECRETS["AUTH_CLIENT_SECRET"] not in message


async def test_a_hosts_httpx_auth_is_used_as_is(tmp_path: Path, server: AuthServer) -> None:
    class HostAuth(http_module().Auth):  # type: ignore[misc]  # httpx.Auth, httpx2.Auth under the SDK 2.x
        def __init__(self) -> None:
            self.requests = 0

        def auth_flow(self, request: httpx.Request) -> Iterator[httpx.Request]:
            self.requests += 1
            request.headers["X-Api-Key"] = SECRETS["AUTH_API_KEY"]
            yield request

    auth = HostAuth()
    registry = make_registry(tmp_path)
    registry.add_mcp_server("guarded", {"url": server.url}, auth=auth)
    assert "auth" not in registry.mcp_servers["guarded"]
    executor = make_executor(registry)
    try:
        assert (await executor.invoke("guarded_ping", {})).output == {"result": "pong"}
    finally:
        await executor.aclose()
    assert auth.requests >= 3  # initialize, tools/list, tools/call at least


async def test_no_secret_appears_in_configs_events_results_logs_or_api_responses(
    tmp_path: Path, key: str, server: AuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    from echo_tools.api import create_app
    from echo_tools.settings import ApiSettings

    registry = registry_with(tmp_path, server, "m-bearer", "m-key", "m-basic", "m-oauth")
    log = MemoryEventLog()
    jsonl = tmp_path / "events.jsonl"
    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        for name in ("m-bearer", "m-key", "m-basic", "m-oauth"):
            registry.add_mcp_server(f"g-{name[2:]}", {"url": server.url, "credential": name})
        executor = make_executor(registry)
        executor.events.add(log)
        executor.events.add(JsonlEventLog(jsonl))
        app = create_app(registry, executor, ApiSettings())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for name in ("bearer", "key", "basic", "oauth"):
                response = await client.post(f"/tools/invoke/id/mcp_g-{name}_ping", json={})
                assert response.status_code == 200, response.text
                seen.append(response.text)
            for path in ("/tools/list", "/tools/credentials", "/tools/mcp_g-oauth_ping"):
                seen.append((await client.get(path)).text)
        registry.credentials.remove("m-basic")
        failed = await executor.invoke("mcp_g-basic_ping", {})
        seen.append(repr(failed))
        await executor.aclose()
    seen += [repr(e) for e in log.events] + [e.to_json() for e in log.events]
    seen += [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    seen.append(jsonl.read_text(encoding="utf-8"))
    storage = tmp_path / "tools"
    seen += [p.read_text(encoding="utf-8", errors="replace") for p in storage.iterdir() if p.is_file()]
    seen.append(repr(registry.list_mcp_servers()))
    text = "\n".join(seen)
    assert "m-oauth" in text and "pong" in text  # names and results are shown; secrets never
    for secret in SECRET_VALUES:
        assert secret not in text, f"{secret!r} leaked"
