"""The one way out: every outbound path connects to the address it checked (DNS rebinding), keeps the URL's
host name for `Host` and TLS, and no other module builds an HTTP client of its own."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from AgentTools.http_request.service import HttpRequestService
from echo_tools.egress import EgressPolicy, egress_client
from echo_tools.errors import EgressDeniedError, ToolExecutionError
from echo_tools.executor import ToolExecutor
from echo_tools.openapi.document import OpenApiError, load_document
from echo_tools.registry import ToolRegistry
from tests.agent_tools._http_support import RecordingServer, Reply, recording_server

ROOT = Path(__file__).resolve().parents[2]
SPEC = {"openapi": "3.0.3", "info": {"title": "inner", "version": "1"}, "paths": {}}


@pytest.fixture
def secret_service() -> Iterator[RecordingServer]:
    """A service listening on 127.0.0.1 only: what a rebinding attacker wants to reach."""
    routes = {"/secret": lambda seen: Reply(body={"secret": "inner"}), "/spec": lambda seen: Reply(body=SPEC)}
    with recording_server(routes) as running:
        yield running


@pytest.fixture
def rebinding_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`rebind.test` answers 127.0.0.2 (allowed by the policies below) once, then 127.0.0.1 (denied)."""
    real = socket.getaddrinfo
    asked: list[str] = []

    def getaddrinfo(host, port, *args, **kwargs):  # noqa: ANN001, ANN202
        if host in ("rebind.test", b"rebind.test"):  # anyio asks with the IDNA-encoded bytes
            asked.append(host)
            host = "127.0.0.2" if len(asked) == 1 else "127.0.0.1"
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return asked


ALLOW_ONLY_127_0_0_2 = EgressPolicy(allowed_hosts=("127.0.0.2",))


def _port(server: RecordingServer) -> int:
    return int(server.url.rsplit(":", 1)[1])


async def test_an_api_tool_connects_to_the_address_it_checked(secret_service, rebinding_dns) -> None:
    registry = ToolRegistry(storage_dir=None, egress=ALLOW_ONLY_127_0_0_2)
    registry.register(
        {
            "name": "Fetch",
            "tool_type": "api",
            "input_schema": {"type": "object", "properties": {}},
            "execution_config": {
                "url": f"http://rebind.test:{_port(secret_service)}/secret",
                "method": "GET",
            },
        }
    )
    executor = ToolExecutor(registry, egress=ALLOW_ONLY_127_0_0_2)
    try:
        result = await executor.invoke("Fetch", {})
    finally:
        await executor.aclose()
    assert secret_service.seen == []
    assert result.success is False and "inner" not in str(result.output)


async def test_the_http_request_tool_connects_to_the_address_it_checked(
    secret_service, rebinding_dns, monkeypatch
) -> None:
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOWED_HOSTS", "127.0.0.2")
    with pytest.raises(ToolExecutionError, match="ConnectError"):
        await HttpRequestService().request(f"http://rebind.test:{_port(secret_service)}/secret")
    assert secret_service.seen == []


def test_an_openapi_document_url_connects_to_the_address_it_checked(secret_service, rebinding_dns) -> None:
    with pytest.raises(OpenApiError, match="cannot be fetched: ConnectError"):
        load_document(f"http://rebind.test:{_port(secret_service)}/spec", ALLOW_ONLY_127_0_0_2)
    assert secret_service.seen == []


class FixedResolver(AbstractResolver):
    """Answers `address` for every host: the injectable resolver of the egress client."""

    def __init__(self, address: str) -> None:
        self.address = address
        self.asked: list[str] = []

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET):
        self.asked.append(host)
        answer: ResolveResult = {
            "hostname": host, "host": self.address, "port": port,
            "family": socket.AF_INET, "proto": 0, "flags": socket.AI_NUMERICHOST,
        }  # fmt: skip
        return [answer]

    async def close(self) -> None:
        return None


async def test_every_resolved_address_is_checked_and_named_in_the_refusal(secret_service) -> None:
    resolver = FixedResolver("127.0.0.1")
    async with egress_client(EgressPolicy(), resolver=resolver) as client:
        with pytest.raises(EgressDeniedError) as caught:
            await client.get(f"http://inner.example:{_port(secret_service)}/secret")
    assert resolver.asked == ["inner.example"]
    assert "127.0.0.1" in caught.value.message and "loopback" in caught.value.message
    assert "ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK" in caught.value.message
    assert secret_service.seen == []


async def test_the_host_name_is_kept_in_the_host_header_when_connecting_to_the_checked_address(
    secret_service,
) -> None:
    resolver = FixedResolver("127.0.0.1")
    async with egress_client(EgressPolicy.local(), resolver=resolver) as client:
        answer = await client.get(f"http://inner.example:{_port(secret_service)}/secret")
    assert answer.json() == {"secret": "inner"}
    assert secret_service.seen[0].headers["host"] == f"inner.example:{_port(secret_service)}"


async def test_a_redirect_to_a_refused_address_is_refused_at_the_hop(secret_service) -> None:
    secret_service.routes["/away"] = lambda seen: Reply(302, headers={"Location": "http://10.0.0.1/x"})
    async with egress_client(EgressPolicy.local(), follow_redirects=True) as client:
        with pytest.raises(EgressDeniedError, match="10.0.0.1"):
            await client.get(f"{secret_service.url}/away")


_CLIENT = re.compile(
    r"\b(httpx\.(Async)?Client|httpx\.(Async)?HTTPTransport|aiohttp\.ClientSession|ClientSession\(\s*connector"
    r"|HttpxAiohttpClient|AiohttpTransport|aiohttp\.TCPConnector"
    # the one-shot helpers build a client of their own too
    r"|httpx\.(get|post|put|patch|delete|head|options|request|stream)|(?<![\w.])requests\.(get|post|put|patch|delete|head|request)|urlopen)\s*\("
)
_ONE_WAY_OUT = {"echo_tools/egress.py", "echo_tools/egress_transport.py"}
# fetches that do not go out through the egress client, each on purpose (the reason is at the line):
_NOT_EGRESS = {
    # the health probe of the llama.cpp server this process started itself on 127.0.0.1
    "workflow_bridge/local_llm.py": "httpx.get(url",
    # check_llm: whether the run's model client will reach the operator's model URL (its docstring)
    "workflow_bridge/llm.py": 'httpx.stream("GET"',
}


def test_no_other_module_builds_an_http_client_of_its_own() -> None:
    found = []
    for package in ("echo_tools", "workflow_bridge", "AgentTools"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative in _ONE_WAY_OUT:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if _CLIENT.search(line) and _NOT_EGRESS.get(relative, "\0") not in line:
                    found.append(f"{relative}:{number}: {line.strip()}")
    assert found == [], "build it with echo_tools.egress.egress_client instead:\n" + "\n".join(found)
