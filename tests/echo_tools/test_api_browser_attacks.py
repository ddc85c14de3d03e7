"""Issue 35: what any web page the local browser opens can send to a keyless `serve` (the default on
127.0.0.1) without a preflight. A `text/plain` or form body, from script or from a script-less `<form>`,
ran tools; nothing checked `Origin`. Each attack is refused before any route reads the body (415 naming
the content type, 403 naming the header), and the tool never runs; clients that are not browsers (no
`Origin`, a JSON body) and the server's own page are answered as before.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import MemoryEventLog
from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support

OWN = "http://127.0.0.1"
FOREIGN = "http://127.0.0.1:5173"  # another loopback port is another origin


@pytest.fixture
def log() -> MemoryEventLog:
    return MemoryEventLog()


async def keyless_client(
    tmp_path: Path, log: MemoryEventLog, settings: ApiSettings | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    registry = support.make_registry(tmp_path / "tools", support.ECHO)
    executor = ToolExecutor(registry, event_sinks=[log])
    app = create_app(registry, executor, settings or ApiSettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=OWN) as client:
        yield client
    await executor.aclose()


@pytest.fixture
async def client(tmp_path: Path, log: MemoryEventLog) -> AsyncIterator[httpx.AsyncClient]:
    async for c in keyless_client(tmp_path, log):
        yield c


def ran(log: MemoryEventLog) -> list[Any]:
    return log.of_type("tool.invoked")


BODY = json.dumps({"text": "pwned"})


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
    ],
)
@pytest.mark.parametrize("path", ["/tools/invoke/tool_echo", "/tools/invoke/id/tool_echo"])
async def test_a_cross_site_simple_body_to_an_invoke_route_is_415_and_runs_nothing(
    client: httpx.AsyncClient, log: MemoryEventLog, path: str, content_type: str
) -> None:
    response = await client.post(path, content=BODY, headers={"Content-Type": content_type})
    assert response.status_code == 415, response.text
    body = response.json()
    assert body["error_type"] == "unsupported_media_type"
    assert body["field"] == "headers.content-type"
    assert content_type.split(";")[0] in body["message"]
    assert ran(log) == []


async def test_a_json_body_from_a_foreign_origin_is_403_naming_the_header(
    client: httpx.AsyncClient, log: MemoryEventLog
) -> None:
    response = await client.post("/tools/invoke/tool_echo", json={"text": "x"}, headers={"Origin": FOREIGN})
    assert response.status_code == 403, response.text
    assert response.json()["field"] == "headers.origin"
    assert FOREIGN in response.json()["message"]
    assert ran(log) == []
    null = await client.post("/tools/invoke/tool_echo", json={"text": "x"}, headers={"Origin": "null"})
    assert null.status_code == 403  # a sandboxed frame or a file:// page


async def test_a_bodiless_post_from_a_foreign_origin_is_refused_too(
    client: httpx.AsyncClient, log: MemoryEventLog
) -> None:
    for path in ("/tools/discover", "/tools/cache/clear"):
        response = await client.post(path, headers={"Origin": FOREIGN})
        assert response.status_code == 403, (path, response.text)


async def test_a_form_post_to_the_workflow_and_credential_routes_is_415(client: httpx.AsyncClient) -> None:
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    for path in ("/workflows/run", "/workflows/compile", "/tools/credentials", "/tools/register",
                 "/tools/approvals/ap_1", "/workflows/runs/r1/resume"):  # fmt: skip
        response = await client.post(path, content="a=b", headers=form)
        assert response.status_code == 415, (path, response.text)
        assert response.json()["error_type"] == "unsupported_media_type"


async def test_the_server_s_own_page_and_clients_without_origin_are_answered(
    client: httpx.AsyncClient, log: MemoryEventLog
) -> None:
    plain = await client.post("/tools/invoke/tool_echo", json={"text": "a"})
    assert plain.status_code == 200, plain.text
    own = await client.post("/tools/invoke/tool_echo", json={"text": "b"}, headers={"Origin": OWN})
    assert own.status_code == 200, own.text
    bare = await client.post("/tools/invoke/tool_echo")  # no body at all: an empty input
    assert bare.status_code == 422 and bare.json()["field"] != "headers.content-type"
    charset = await client.post(
        "/tools/invoke/tool_echo", content=json.dumps({"text": "c"}),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )  # fmt: skip
    assert charset.status_code == 200
    assert len(ran(log)) == 3


async def test_a_configured_cors_origin_may_post(tmp_path: Path, log: MemoryEventLog) -> None:
    settings = ApiSettings(cors_origins=(FOREIGN,))
    async for client in keyless_client(tmp_path, log, settings):
        allowed = await client.post(
            "/tools/invoke/tool_echo", json={"text": "x"}, headers={"Origin": FOREIGN}
        )
        assert allowed.status_code == 200, allowed.text
        other = await client.post(
            "/tools/invoke/tool_echo", json={"text": "x"}, headers={"Origin": "http://127.0.0.1:9"}
        )
        assert other.status_code == 403


async def test_reads_from_another_origin_are_not_refused_by_the_origin_check(
    client: httpx.AsyncClient,
) -> None:
    # a GET changes nothing, and the browser keeps its answer from the page (no CORS headers)
    response = await client.get("/tools/list", headers={"Origin": FOREIGN})
    assert response.status_code == 200


async def test_a_server_with_a_key_takes_text_bodies_from_its_own_clients(
    tmp_path: Path, log: MemoryEventLog
) -> None:
    # a web page cannot send the key, so a keyed server needs no content-type rule
    settings = ApiSettings(api_key="k" * 16)
    async for client in keyless_client(tmp_path, log, settings):
        response = await client.post(
            "/tools/invoke/tool_echo",
            content=BODY,
            headers={"Content-Type": "text/plain", "X-API-Key": "k" * 16},
        )
        assert response.status_code == 200, response.text


# -- every route answers a deep or huge body with a 4xx ---------------------------------------------------


def nested(depth: int) -> str:
    return '{"text": ' + "[" * depth + "]" * depth + "}"


@pytest.mark.parametrize("path", ["/tools/invoke/tool_echo", "/tools/invoke/id/tool_echo"])
async def test_a_10kb_nested_body_to_an_invoke_route_is_4xx_not_500(
    client: httpx.AsyncClient, log: MemoryEventLog, path: str
) -> None:
    response = await client.post(path, content=nested(5_000), headers={"Content-Type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["field"] == "body"
    assert ran(log) == []
