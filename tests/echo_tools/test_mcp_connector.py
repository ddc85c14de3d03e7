"""EchoAI's connector path: an `mcp` tool with `{connector_id}` posts `{connector_id, payload}` to
`<ECHO_CONNECTOR_BASE_URL>/connectors/mcp/invoke` (a real HTTP server on 127.0.0.1 here).
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry


class _Connectors(BaseHTTPRequestHandler):
    received: list[tuple[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - the http.server hook name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append((self.path, body))
        if body["connector_id"] == "broken":
            self._answer(502, b'{"detail": "upstream MCP server down"}')
        elif body["connector_id"] == "texty":
            self._answer(200, b"plain words", "text/plain")
        else:
            self._answer(200, json.dumps({"echo": body["payload"], "via": body["connector_id"]}).encode())

    def _answer(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def connector_base(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Connectors)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("ECHO_CONNECTOR_BASE_URL", base + "/")
    _Connectors.received.clear()
    yield base
    server.shutdown()
    server.server_close()
    thread.join(10)


def _connector_tool(connector_id: str) -> dict[str, Any]:
    return {
        "tool_id": f"connector_{connector_id}",
        "name": f"Connector {connector_id}",
        "tool_type": "MCP",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
        "execution_config": {"connector_id": connector_id},
    }


@pytest.fixture
async def executor() -> AsyncIterator[ToolExecutor]:
    registry = ToolRegistry(egress=EgressPolicy.local())
    for connector_id in ("crm", "broken", "texty"):
        registry.register(_connector_tool(connector_id))
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    yield executor
    await executor.aclose()


async def test_a_connector_tool_posts_its_id_and_payload_to_the_invoke_route(
    connector_base: str, executor: ToolExecutor
) -> None:
    result = await executor.invoke("connector_crm", {"q": "open deals"})
    assert result.success, result.error
    assert result.output == {"echo": {"q": "open deals"}, "via": "crm"}
    assert result.metadata["status"] == 200
    assert _Connectors.received == [
        ("/connectors/mcp/invoke", {"connector_id": "crm", "payload": {"q": "open deals"}})
    ]


async def test_a_non_2xx_answer_is_a_failure_naming_the_status(
    connector_base: str, executor: ToolExecutor
) -> None:
    result = await executor.invoke("connector_broken", {"q": "x"})
    assert not result.success and result.error_type == "execution"
    assert "502" in (result.error or "") and "upstream MCP server down" in (result.error or "")
    assert "'broken'" in (result.error or "")


async def test_a_text_answer_is_kept_as_text(connector_base: str, executor: ToolExecutor) -> None:
    result = await executor.invoke("connector_texty", {})
    assert result.output == "plain words"


async def test_the_connector_call_goes_through_the_egress_policy(connector_base: str) -> None:
    registry = ToolRegistry()
    registry.register(_connector_tool("crm"))
    executor = ToolExecutor(registry)  # default policy: loopback refused
    try:
        result = await executor.invoke("connector_crm", {"q": "x"})
        assert not result.success and "loopback" in (result.error or "")
        assert _Connectors.received == []
    finally:
        await executor.aclose()
