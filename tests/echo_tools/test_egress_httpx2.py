"""The one outbound client as an `httpx2.AsyncClient` (the MCP SDK 2.x's HTTP client): the same policy on the
address it connects to, the same bounds, redirect hops checked, errors of httpx2's own kinds, and no other
module builds an httpx2 client (or lets the SDK build one)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from echo_tools.egress import EgressPolicy, egress_client
from echo_tools.errors import EgressDeniedError
from tests.agent_tools._http_support import RecordingServer, Reply, recording_server
from tests.echo_tools.test_egress_client import FixedResolver

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def service() -> Iterator[RecordingServer]:
    routes = {
        "/secret": lambda seen: Reply(body={"secret": "inner"}),
        "/big": lambda seen: Reply(body=b"x" * 5000, content_type="text/plain"),
        "/away": lambda seen: Reply(302, headers={"Location": "http://10.0.0.1/x"}),
    }
    with recording_server(routes) as running:
        yield running


def _port(server: RecordingServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


async def test_the_httpx2_client_is_refused_a_loopback_address_by_the_strict_policy(service) -> None:
    resolver = FixedResolver("127.0.0.1")
    async with egress_client(EgressPolicy(), resolver=resolver, library="httpx2") as client:
        assert isinstance(client, httpx2.AsyncClient)
        with pytest.raises(EgressDeniedError) as caught:
            await client.get(f"http://inner.example:{_port(service)}/secret")
    assert "127.0.0.1" in caught.value.message and "loopback" in caught.value.message
    assert service.seen == []  # nothing reached the service


async def test_the_httpx2_client_connects_to_the_checked_address_keeping_the_host_name(service) -> None:
    async with egress_client(
        EgressPolicy.local(), resolver=FixedResolver("127.0.0.1"), library="httpx2"
    ) as client:
        answer = await client.get(f"http://inner.example:{_port(service)}/secret")
    assert isinstance(answer, httpx2.Response) and answer.json() == {"secret": "inner"}
    assert service.seen[0].headers["host"] == f"inner.example:{_port(service)}"


async def test_a_redirect_hop_of_the_httpx2_client_is_checked_too(service) -> None:
    async with egress_client(EgressPolicy.local(), follow_redirects=True, library="httpx2") as client:
        with pytest.raises(EgressDeniedError, match="10.0.0.1"):
            await client.get(f"{service.url}/away")


async def test_a_body_past_the_bound_stops_with_an_httpx2_decoding_error(service) -> None:
    async with egress_client(EgressPolicy.local(), max_body_bytes=1000, library="httpx2") as client:
        with pytest.raises(httpx2.DecodingError, match="exceeds the limit of 1000 bytes"):
            await client.get(f"{service.url}/big")


async def test_a_refused_connection_is_an_httpx2_connect_error_naming_nothing_else() -> None:
    async with egress_client(EgressPolicy.local(), library="httpx2") as client:
        with pytest.raises(httpx2.ConnectError):
            await client.get("http://127.0.0.1:9/unreachable")  # the discard port: nothing listens


async def test_an_unknown_library_is_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="'requests'"):
        egress_client(EgressPolicy.local(), library="requests")


_HTTPX2_CLIENT = re.compile(
    r"\bhttpx2\.(Async)?Client\s*\(|\bhttpx2\.(Async)?HTTPTransport\s*\(|\bhttpx2\.(get|post|request|stream)\s*\("
    r"|create_mcp_http_client"  # the SDK's own client: never used, every transport gets ours
)


def test_no_module_but_egress_builds_an_httpx2_client_or_lets_the_sdk_build_one() -> None:
    found = []
    for package in ("echo_tools", "workflow_bridge", "AgentTools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "echo_tools/egress.py":
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _HTTPX2_CLIENT.search(line):
                    found.append(f"{relative}:{number}: {line.strip()}")
    assert found == [], "build it with echo_tools.egress.egress_client(..., library='httpx2'):\n" + "\n".join(
        found
    )
