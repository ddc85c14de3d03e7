"""Compression bombs on the outbound paths added after the `api` backend: an OpenAPI document fetched by URL,
an OAuth2 token endpoint, an MCP server URL named on a canvas. Each is answered by a 128 MiB zstd body
through a real `echo-tools serve`, whose resident memory must stay within 64 MiB of its idle size."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import zstandard

from tests.agent_tools._http_support import RecordingServer, Reply, recording_server
from tests.echo_tools._egress_support import attack as _attack
from tests.echo_tools._egress_support import attack_server

MB = 1024 * 1024
BOMB_BYTES = 128 * MB


@pytest.fixture(scope="module")
def bomb_server() -> Iterator[RecordingServer]:
    compressor = zstandard.ZstdCompressor(level=3).compressobj()
    zero = bytes(MB)
    body = b"".join(compressor.compress(zero) for _ in range(BOMB_BYTES // MB)) + compressor.flush()

    def bomb(seen: object) -> Reply:
        return Reply(body=body, headers={"Content-Encoding": "zstd"})

    routes = {"/openapi.json": bomb, "/token": bomb, "/mcp": bomb, "/api": lambda seen: Reply(body={"ok": 1})}
    with recording_server(routes) as running:
        yield running


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    with attack_server(tmp_path_factory.mktemp("attacked")) as url_and_pid:
        yield url_and_pid


def test_an_openapi_document_bomb_is_refused_with_the_server_memory_bounded(served, bomb_server) -> None:
    (answer,) = _attack(
        served,
        ("POST", "/tools/import/openapi", {"spec": f"{bomb_server.url}/openapi.json", "provider": "bomb"}),
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "spec"
    assert "larger than 10485760 bytes (decoded)" in answer.json()["message"]
    listed = httpx.get(f"{served[0]}/tools", timeout=30).text
    assert "provider:bomb" not in listed and "bomb_" not in listed  # nothing stored


def test_an_oauth2_token_bomb_fails_the_call_with_the_server_memory_bounded(served, bomb_server) -> None:
    credential = {
        "type": "oauth2_client_credentials",
        "token_url": f"{bomb_server.url}/token",
        "client_id": "bomb-client",
        "client_secret": "bomb-secret",
        "hosts": ["127.0.0.1"],
    }
    spec = {
        "openapi": "3.0.3",
        "info": {"title": "bombed", "version": "1"},
        "servers": [{"url": bomb_server.url}],
        "paths": {"/api": {"get": {"operationId": "getApi", "responses": {"200": {"description": "ok"}}}}},
    }
    imported = {"spec": spec, "provider": "bombed", "credential": "bombed"}
    stored, registered, invoked = _attack(
        served,
        ("POST", "/tools/credentials", {"name": "bombed", "credential": credential}),
        ("POST", "/tools/import/openapi", imported),
        ("POST", "/tools/invoke/bombed_get_api", {}),
    )
    assert stored.status_code == 200 and registered.status_code == 200, registered.text
    assert invoked.status_code != 200 or invoked.json()["success"] is False, invoked.text
    assert "answered more than 65536 bytes" in invoked.text
    assert "bomb-secret" not in invoked.text


def test_an_mcp_server_bomb_named_on_a_canvas_is_refused_with_the_server_memory_bounded(
    served, bomb_server
) -> None:
    entry = {
        "id": 3, "name": "Bomb", "type": "mcp_server", "enabled": True,
        "config": {"serverId": "bomb", "operationName": "add", "serverUrl": f"{bomb_server.url}/mcp"},
    }  # fmt: skip
    canvas = {
        "canvas_nodes": [
            {"id": 1, "type": "Start", "name": "Start", "config": {}},
            {"id": 2, "type": "Agent", "name": "Bombed", "config": {"prompt": "x", "tools": [entry]}},
            {"id": 4, "type": "End", "name": "End", "config": {}},
        ],
        "connections": [{"id": 10, "from": 1, "to": 2}, {"id": 11, "from": 2, "to": 4}],
        "workflow_name": "Bombed",
        "execution_model": "sequential",
    }
    harmless = {**canvas, "canvas_nodes": [{**n, "config": {"prompt": "x"}} for n in canvas["canvas_nodes"]]}
    # a compile stores nothing and so never reaches the server (the gate); a run by a principal granted
    # `mcp` (here the operator) lists the server's tools, through the egress client
    (answer,) = _attack(
        served, ("POST", "/workflows/run", canvas), warm_up=("POST", "/workflows/run", harmless)
    )
    assert answer.status_code == 200, answer.text  # the run's event stream, which ends in its failure
    assert bomb_server.seen and bomb_server.seen[-1].path == "/mcp"
    assert "event: run.failed" in answer.text and "config.serverUrl" in answer.text
    assert "exceeds the limit of 8388608 bytes" in answer.text
    assert "stdout" not in answer.text  # an HTTP server's refusal says nothing of a program's stdout
