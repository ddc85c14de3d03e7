"""`execution_config.credential` on `mcp` tools: the tools of a server with a credential show it; a tool
naming a credential of its own is called on a session authenticated with it (a real server on 127.0.0.1);
a connector-service tool sends it with its POST."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from echo_tools import ToolDef, ToolType
from echo_tools.errors import ToolRegistrationError
from echo_tools.models import ToolSource
from tests.echo_tools._mcp_auth_support import SECRETS, AuthServer, auth_server
from tests.echo_tools._mcp_support import CALC, add_listed_server, make_executor, make_registry, stdio_config

pytestmark = pytest.mark.slow


server = auth_server("static")


@pytest.fixture(autouse=True)
def _with_key(key: str) -> str:
    return key  # every test here stores credentials


def ping_tool(credential: str, server: str = "guarded") -> ToolDef:
    return ToolDef(
        tool_id=f"ping_as_{credential}",
        name=f"ping_as_{credential}",
        tool_type=ToolType.MCP,
        execution_config={"server": server, "tool": "ping", "credential": credential},
        source=ToolSource.PYTHON,
    )


async def test_a_tool_with_its_own_credential_uses_a_session_authenticated_with_it(
    tmp_path: Path, server: AuthServer
) -> None:
    registry = make_registry(tmp_path)
    registry.credentials.set("m-bearer", {"type": "bearer", "token": SECRETS["AUTH_BEARER"]})
    key_credential = {
        "type": "api_key",
        "in": "header",
        "name": "X-Api-Key",
        "value": SECRETS["AUTH_API_KEY"],
    }
    registry.credentials.set("m-key", key_credential)
    registry.credentials.set("m-stale", {"type": "bearer", "token": "stale-token-0"})
    [listed] = registry.add_mcp_server("guarded", {"url": server.url, "credential": "m-bearer"})
    assert listed.execution_config == {"server": "guarded", "tool": "ping", "credential": "m-bearer"}
    registry.register(ping_tool("m-key"))
    registry.register(ping_tool("m-stale"))
    executor = make_executor(registry)
    try:
        own = await executor.invoke("ping_as_m-key", {})
        assert own.success, own.error
        stale = await executor.invoke("ping_as_m-stale", {})
        assert not stale.success
        assert "credential 'm-stale'" in (stale.error or "") and "401" in (stale.error or "")
        shared = await executor.invoke("guarded_ping", {})  # the server's own session is untouched
        assert shared.success, shared.error
    finally:
        await executor.aclose()


async def test_a_tool_credential_on_a_stdio_server_is_refused_naming_the_field(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    add_listed_server(registry, "calc", stdio_config(CALC))  # the refusal needs the config, not a discovery
    registry.register(ping_tool("m-key", server="calc"))
    executor = make_executor(registry)
    try:
        result = await executor.invoke("ping_as_m-key", {})
    finally:
        await executor.aclose()
    assert not result.success
    assert result.error_field == "execution_config.credential"
    assert "'m-key'" in (result.error or "") and "'calc'" in (result.error or "")


class _Connector(BaseHTTPRequestHandler):
    seen: list[str | None] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
        self.rfile.read(int(self.headers["Content-Length"]))
        type(self).seen.append(self.headers.get("Authorization"))
        body = json.dumps({"ok": True}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


async def test_a_connector_tool_sends_its_credential_to_the_connector_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = ThreadingHTTPServer(("127.0.0.1", 0), _Connector)
    thread = threading.Thread(target=service.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("ECHO_CONNECTOR_BASE_URL", f"http://127.0.0.1:{service.server_address[1]}")
    _Connector.seen.clear()
    try:
        registry = make_registry(tmp_path)
        registry.credentials.set("svc", {"type": "bearer", "token": "connector-token-1"})
        registry.register(
            ToolDef(
                tool_id="connector_crm",
                name="connector_crm",
                tool_type=ToolType.MCP,
                execution_config={"connector_id": "crm", "credential": "svc"},
                source=ToolSource.PYTHON,
            )
        )
        executor = make_executor(registry)
        try:
            result = await executor.invoke("connector_crm", {"q": 1})
        finally:
            await executor.aclose()
    finally:
        service.shutdown()
        service.server_close()
        thread.join(10)
    assert result.success, result.error
    assert _Connector.seen == ["Bearer connector-token-1"]


async def test_a_remote_tool_naming_a_credential_that_does_not_exist_yet_is_refused(
    tmp_path: Path, server: AuthServer
) -> None:
    registry = make_registry(tmp_path)
    registry.credentials.set("m-bearer", {"type": "bearer", "token": SECRETS["AUTH_BEARER"]})
    registry.add_mcp_server("guarded", {"url": server.url, "credential": "m-bearer"})
    remote = ping_tool("late").model_copy(update={"source": ToolSource.REMOTE})
    with pytest.raises(ToolRegistrationError) as refused:  # a credential stored later must not go there
        registry.register(remote)
    assert refused.value.field == "execution_config.credential"
    assert "'late' does not exist" in refused.value.message
    assert registry.get("ping_as_late") is None
