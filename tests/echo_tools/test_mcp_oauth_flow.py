"""OAuth 2.1 for an HTTP MCP server through the MCP SDK on both sides: a real server on 127.0.0.1 with the
SDK's authorization server (metadata, dynamic registration, PKCE, token and refresh grants), the client's
`OAuthClientProvider` with its tokens kept encrypted in the credential store, and the host's handlers
standing in for the person at the browser."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from echo_tools import MCPConnectionError, ToolConfigError, ToolRegistry
from echo_tools.credentials import SECRET_KEY_ENV, STORE_FILE
from echo_tools.mcp.auth import set_oauth_handlers
from tests.echo_tools._mcp_auth_support import AuthServer, auth_server
from tests.echo_tools._mcp_support import make_executor, make_registry

pytestmark = pytest.mark.slow


server = auth_server("oauth")


class Browser:
    """The host's part: 'opens' the authorization URL (the test server approves at once) and hands the
    code and state of the redirect back to the SDK."""

    def __init__(self) -> None:
        self.opened: list[str] = []
        self.answer: tuple[str, str | None] | None = None

    async def redirect(self, url: str) -> None:
        self.opened.append(url)
        async with httpx.AsyncClient() as client:
            response = await client.get(url)
        assert response.status_code in (302, 303, 307), response.text
        query = parse_qs(urlsplit(response.headers["location"]).query)
        self.answer = (query["code"][0], query.get("state", [None])[0])

    async def callback(self) -> tuple[str, str | None]:
        assert self.answer is not None
        return self.answer


def authorized(tmp_path: Path, server: AuthServer) -> tuple[ToolRegistry, Browser]:
    registry = make_registry(tmp_path)
    browser = Browser()
    set_oauth_handlers(registry, browser.redirect, browser.callback)
    registry.add_mcp_server("secure", {"url": server.url, "oauth": {"scopes": ["tools"]}})
    return registry, browser


async def test_the_sdk_flow_authorizes_once_and_the_tokens_are_kept_encrypted(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    grants = server.stats()["code_grants"]
    registry, browser = authorized(tmp_path, server)
    assert len(browser.opened) == 1 and "code_challenge=" in browser.opened[0]
    assert server.stats()["code_grants"] == grants + 1
    executor = make_executor(registry)
    try:
        result = await executor.invoke("secure_ping", {})
        assert result.success, result.error
        assert result.output == {"result": "pong"}
    finally:
        await executor.aclose()
    assert len(browser.opened) == 1  # the call reused the stored token
    assert registry.credentials.list() == [{"name": "mcp-oauth-secure", "type": "mcp_oauth"}]
    state = registry.credentials.load_mcp_oauth("mcp-oauth-secure")
    assert state is not None and state["server_url"] == server.url
    access = httpx.Response(200, content=state["tokens"]).json()["access_token"]
    stored = (tmp_path / "tools" / STORE_FILE).read_text(encoding="utf-8")
    assert access not in stored and "refresh_token" not in stored  # encrypted at rest
    assert "oauth" in registry.mcp_servers["secure"] and access not in str(registry.mcp_servers)


async def test_a_later_process_uses_the_stored_tokens_without_a_person(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    authorized(tmp_path, server)
    grants = server.stats()["code_grants"]
    later = make_registry(tmp_path)  # no handlers: nobody could authorize now
    assert [t.tool_id for t in later.refresh_mcp_server("secure")] == ["mcp_secure_ping"]
    executor = make_executor(later)
    try:
        assert (await executor.invoke("secure_ping", {})).success
    finally:
        await executor.aclose()
    assert server.stats()["code_grants"] == grants


def test_an_expired_stored_token_is_refreshed_without_a_person(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry, _ = authorized(tmp_path, server)
    state = registry.credentials.load_mcp_oauth("mcp-oauth-secure")
    assert state is not None
    registry.credentials.set("mcp-oauth-secure", {**state, "expires_at": time.time() - 60})
    before = server.stats()
    later = make_registry(tmp_path)
    assert [t.tool_id for t in later.refresh_mcp_server("secure")] == ["mcp_secure_ping"]
    after = server.stats()
    assert after["refresh_grants"] == before["refresh_grants"] + 1
    assert after["code_grants"] == before["code_grants"]
    renewed = later.credentials.load_mcp_oauth("mcp-oauth-secure")
    assert renewed is not None and renewed["tokens"] != state["tokens"]
    assert renewed["expires_at"] > time.time()


def test_without_tokens_or_handlers_the_error_says_a_person_must_authorize(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry = make_registry(tmp_path)
    with pytest.raises(MCPConnectionError) as caught:
        registry.add_mcp_server("secure", {"url": server.url, "oauth": {}})
    message = caught.value.message
    assert "'secure'" in message and server.url in message and "needs OAuth authorization" in message
    assert "echo-tools mcp login secure" in message
    assert "secure" not in registry.mcp_servers


def test_tokens_stored_for_another_server_url_are_never_sent(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry, _ = authorized(tmp_path, server)
    state = registry.credentials.load_mcp_oauth("mcp-oauth-secure")
    assert state is not None
    registry.credentials.set("mcp-oauth-elsewhere", {**state, "server_url": "http://127.0.0.1:9/mcp"})
    later = make_registry(tmp_path)
    with pytest.raises(MCPConnectionError) as caught:
        later.add_mcp_server("other", {"url": server.url, "oauth": {"credential": "mcp-oauth-elsewhere"}})
    assert "needs OAuth authorization" in caught.value.message


def test_an_oauth_credential_name_of_another_type_is_refused_naming_it(
    tmp_path: Path, key: str, server: AuthServer
) -> None:
    registry = make_registry(tmp_path)
    registry.credentials.set("plain", {"type": "bearer", "token": "tok-secret-1"})
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("secure", {"url": server.url, "oauth": {"credential": "plain"}})
    assert caught.value.field == "mcpServers.secure.oauth.credential"
    assert "'plain'" in caught.value.message and "'bearer'" in caught.value.message
    assert "tok-secret-1" not in caught.value.message


def test_without_the_store_key_oauth_is_refused_before_anyone_authorizes(
    tmp_path: Path, server: AuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    registry = make_registry(tmp_path)
    browser = Browser()
    set_oauth_handlers(registry, browser.redirect, browser.callback)
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("secure", {"url": server.url, "oauth": {}})
    assert caught.value.field == SECRET_KEY_ENV
    assert "echo-tools credentials new-key" in caught.value.message
    assert browser.opened == []


async def test_no_oauth_secret_appears_in_configs_events_results_logs_or_api_responses(
    tmp_path: Path, key: str, server: AuthServer, caplog: pytest.LogCaptureFixture
) -> None:
    import json
    import logging

    from echo_tools import MemoryEventLog
    from echo_tools.api import create_app
    from echo_tools.settings import ApiSettings

    seen: list[str] = []
    with caplog.at_level(logging.DEBUG):
        registry, _ = authorized(tmp_path, server)
        log = MemoryEventLog()
        executor = make_executor(registry)
        executor.events.add(log)
        transport = httpx.ASGITransport(app=create_app(registry, executor, ApiSettings()))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            response = await client.post("/tools/invoke/id/mcp_secure_ping", json={})
            assert response.status_code == 200, response.text
            for path in ("/tools/list", "/tools/credentials", "/tools/mcp_secure_ping"):
                seen.append((await client.get(path)).text)
        seen.append(response.text)
        await executor.aclose()
    state = registry.credentials.load_mcp_oauth("mcp-oauth-secure")
    assert state is not None
    tokens, client_info = json.loads(state["tokens"]), json.loads(state["client_info"])
    secrets = [tokens["access_token"], tokens["refresh_token"], client_info["client_secret"]]
    seen += [repr(e) for e in log.events] + [e.to_json() for e in log.events]
    seen += [r.getMessage() for r in caplog.records] + [repr(r.args) for r in caplog.records]
    storage = tmp_path / "tools"
    seen += [p.read_text(encoding="utf-8", errors="replace") for p in storage.iterdir() if p.is_file()]
    seen += [repr(registry.list_mcp_servers()), repr(registry.credentials)]
    text = "\n".join(seen)
    assert "mcp-oauth-secure" in text and "pong" in text
    for secret in secrets:
        assert secret not in text, f"{secret!r} leaked"


def test_the_oauth_flow_is_held_to_the_egress_policy(tmp_path: Path, key: str) -> None:
    from echo_tools import EgressPolicy

    elsewhere = AuthServer("oauth-localhost").start()
    try:
        policy = EgressPolicy(allow_loopback=True, denied_hosts=("localhost",))
        registry = ToolRegistry(tmp_path / "tools", egress=policy)
        browser = Browser()
        set_oauth_handlers(registry, browser.redirect, browser.callback)
        with pytest.raises(MCPConnectionError) as caught:
            registry.add_mcp_server("secure", {"url": elsewhere.url, "oauth": {}})
        assert "'secure'" in caught.value.message and "localhost" in caught.value.message
        assert browser.opened == [] and elsewhere.stats()["code_grants"] == 0
    finally:
        elsewhere.stop()
