"""MCP tools over streamable HTTP, end to end: a real server process listening on 127.0.0.1, discovered
by the registry and called through the executor (results, concurrency, timeouts that cancel on the
server, a server restart, tool-list changes, headers from the environment, the egress policy).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from echo_tools import EgressPolicy, MCPConnectionError, ToolContext, ToolExecutor, ToolRegistry, ToolStatus
from echo_tools.models import ToolType
from tests.echo_tools._mcp_support import EventWaiter, HttpServer, make_executor, make_registry


@pytest.fixture(scope="module")
def shared_server() -> Iterator[HttpServer]:
    """One server process for the module. Tests that crash or restart it leave it listening again on the
    same port; the test that changes its tool list discovers before the change and only calls tools that
    no other test calls, so each test passes in any order and alone."""
    server = HttpServer().start()
    yield server
    server.stop()


@pytest.fixture
def own_server(shared_server: HttpServer) -> HttpServer:
    """The module's server, for tests that crash, restart or change it."""
    return shared_server


def _registry(tmp_path: Path, server: HttpServer, **extra: object) -> ToolRegistry:
    registry = make_registry(tmp_path)
    registry.add_mcp_server("web", {"url": server.url, **extra})
    return registry


@pytest.fixture
async def executor(tmp_path: Path, shared_server: HttpServer) -> AsyncIterator[ToolExecutor]:
    executor = make_executor(_registry(tmp_path, shared_server))
    yield executor
    await executor.aclose()


def test_discovery_over_http_registers_the_tools(tmp_path: Path, shared_server: HttpServer) -> None:
    registry = _registry(tmp_path, shared_server)
    add = registry.get("mcp_web_add")
    assert add is not None and add.tool_type == ToolType.MCP
    assert add.execution_config == {"server": "web", "tool": "add"}
    assert registry.mcp_servers["web"] == {"url": shared_server.url, "transport": "streamable_http"}


async def test_calls_over_http_return_structured_and_text_output(executor: ToolExecutor) -> None:
    added = await executor.invoke("web_add", {"a": 40, "b": 2})
    assert added.success and added.output == {"result": 42.0}
    greeted = await executor.invoke("web_greet", {"name": "Lin"})
    assert greeted.output == "Hello, Lin!"
    failed = await executor.invoke("web_fail", {"message": "quota exceeded"})
    assert not failed.success and "quota exceeded" in (failed.error or "")


async def test_twenty_concurrent_http_calls_share_one_session(executor: ToolExecutor) -> None:
    results = await asyncio.gather(
        *(executor.invoke("web_gather", {"key": "h20", "count": 20}) for _ in range(20))
    )
    assert all(r.success for r in results), [r.error for r in results if not r.success]
    assert len({r.output["result"] for r in results}) == 1


async def test_a_timed_out_http_call_is_cancelled_on_the_server(executor: ToolExecutor) -> None:
    assert (await executor.invoke("web_pid", {})).success  # the session is open: the deadline hits the call
    result = await executor.invoke("web_sleep", {"seconds": 60, "marker": "h1"}, ToolContext(timeout_ms=300))
    assert result.error_type == "timeout"
    cancelled = await executor.invoke("web_wait_cancelled", {"marker": "h1", "timeout": 10})
    assert cancelled.success and cancelled.output == {"result": True}


async def test_headers_resolve_env_references_at_connect_time(
    tmp_path: Path, shared_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_MCP_HTTP_TOKEN", "abc-789")
    registry = _registry(tmp_path, shared_server, headers={"X-Echo-Token": "Bearer ${ECHO_MCP_HTTP_TOKEN}"})
    assert registry.mcp_servers["web"]["headers"] == {"X-Echo-Token": "Bearer ${ECHO_MCP_HTTP_TOKEN}"}
    executor = make_executor(registry)
    try:
        result = await executor.invoke("web_header", {"name": "x-echo-token"})
        assert result.output == {"result": "Bearer abc-789"}
    finally:
        await executor.aclose()


async def test_a_restarted_server_is_reached_on_a_fresh_session(
    tmp_path: Path, own_server: HttpServer
) -> None:
    executor = make_executor(_registry(tmp_path, own_server))
    try:
        before = (await executor.invoke("web_pid", {})).output["result"]
        crashed = await executor.invoke("web_crash", {})
        assert not crashed.success and crashed.error_type == "execution"
        down = await executor.invoke("web_pid", {})
        assert not down.success and "'web'" in (down.error or "")
        own_server.restart()
        after = await executor.invoke("web_pid", {})
        assert after.success, after.error
        assert after.output["result"] != before
    finally:
        await executor.aclose()


async def test_an_http_tool_list_change_is_applied_to_the_registry(
    tmp_path: Path, own_server: HttpServer
) -> None:
    registry = _registry(tmp_path, own_server)
    waiter = EventWaiter()
    registry.events.add(waiter)
    executor = make_executor(registry)
    try:
        assert (await executor.invoke("web_change_tools", {})).success
        assert await asyncio.to_thread(waiter.wait_for, "mcp_web_new_tool", "mcp_web_old_tool")
        assert registry.get("mcp_web_old_tool").status == ToolStatus.DISABLED  # type: ignore[union-attr]
        assert (await executor.invoke("web_new_tool", {"x": 5})).output == {"result": 10}
    finally:
        await executor.aclose()


async def test_a_server_restarted_while_idle_is_reached_transparently(
    tmp_path: Path, own_server: HttpServer
) -> None:
    executor = make_executor(_registry(tmp_path, own_server))
    try:
        before = (await executor.invoke("web_pid", {})).output["result"]
        own_server.restart()  # the new process does not know the old session id: it answers 404
        after = await executor.invoke("web_pid", {})
        assert after.success, after.error
        assert after.output["result"] != before
    finally:
        await executor.aclose()


async def test_tools_of_an_sse_server_are_discovered_and_called(
    tmp_path: Path, shared_server: HttpServer
) -> None:
    registry = make_registry(tmp_path)
    registry.add_mcp_server("old", {"url": shared_server.sse_url, "transport": "sse"})
    executor = make_executor(registry)
    try:
        result = await executor.invoke("old_add", {"a": 1, "b": 2})
        assert result.success and result.output == {"result": 3.0}
    finally:
        await executor.aclose()


def test_the_registry_egress_policy_refuses_a_loopback_server_by_default(shared_server: HttpServer) -> None:
    registry = ToolRegistry(egress=EgressPolicy())
    with pytest.raises(MCPConnectionError) as caught:
        registry.add_mcp_server("web", {"url": shared_server.url})
    assert "loopback" in caught.value.message and "'web'" in caught.value.message
    assert registry.mcp_servers == {}


async def test_the_executor_egress_policy_applies_to_pooled_sessions(
    tmp_path: Path, shared_server: HttpServer
) -> None:
    executor = ToolExecutor(_registry(tmp_path, shared_server), egress=EgressPolicy())
    try:
        result = await executor.invoke("web_add", {"a": 1, "b": 2})
        assert not result.success and "loopback" in (result.error or "")
    finally:
        await executor.aclose()


def test_a_server_that_is_not_listening_fails_clearly(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(MCPConnectionError) as caught:
        make_registry().add_mcp_server("nobody", {"url": f"http://127.0.0.1:{port}/mcp", "timeout": 5})
    assert "'nobody'" in caught.value.message and str(port) in caught.value.message
