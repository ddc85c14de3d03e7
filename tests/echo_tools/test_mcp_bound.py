"""Servers bound for one compile or run (`echo_tools.mcp.bound`): found only by that run's calls of that
principal, their config held while a block holds them, forgotten when the last one ends."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import types

from echo_tools import ToolRegistry
from echo_tools.errors import ToolNotFoundError
from echo_tools.mcp.bound import BoundSet, bound_config, bound_name, bound_scope, bound_tool, current_scope
from echo_tools.mcp.config import apply_listing, server_config, tool_defs
from echo_tools.models import ToolContext

URL = "https://mcp.example.org/mcp"
LISTING = [types.Tool(name="add", inputSchema={"type": "object"})]


def _bind(scope: BoundSet, server: str = "web") -> str:
    tools = scope.bind(server, {"url": URL, "transport": "streamable_http"}, tool_defs(bound_name(server, URL), LISTING))  # fmt: skip
    (tool,) = tools
    assert tool.name == f"{server}_add" and "mcp_bound" in tool.tags
    return tool.tool_id


def test_a_bound_tool_is_found_by_its_run_s_calls_of_its_principal_only() -> None:
    with bound_scope("run-a", "ide") as scope:
        tool_id = _bind(scope)
        assert bound_tool(tool_id, ToolContext(run_id="run-a", principal="ide")) is not None
        assert current_scope() is scope
    assert current_scope() is None
    assert bound_tool(tool_id, ToolContext(run_id="run-a", principal="ide")) is None


def test_a_bound_config_is_held_until_the_last_block_holding_it_ends() -> None:
    name = bound_name("web", URL)
    with bound_scope("run-1", "a") as first:
        _bind(first)
        with bound_scope("run-2", "b") as second:
            _bind(second)
        assert bound_config(name) == {"url": URL, "transport": "streamable_http"}
    assert bound_config(name) is None
    with pytest.raises(ToolNotFoundError, match="one workflow run only"):
        server_config(ToolRegistry(), name)


def test_a_bound_server_s_listing_registers_nothing() -> None:
    registry = ToolRegistry()
    with bound_scope("run-3", "a") as scope:
        _bind(scope)
        assert apply_listing(registry, bound_name("web", URL), LISTING) == []
    assert registry.list_by_type("mcp") == [] and registry.mcp_servers == {}


def test_a_bound_server_s_session_is_closed_by_the_pool_once_its_run_has_ended() -> None:
    import asyncio

    from echo_tools import EgressPolicy
    from echo_tools.mcp.sessions import MCPSessionPool
    from tests.echo_tools._mcp_support import HttpServer

    server = HttpServer().start()

    async def scenario() -> tuple[Any, Any, Any]:
        pool = MCPSessionPool(EgressPolicy.local())
        config = {"url": server.url, "transport": "streamable_http"}
        name = bound_name("web", server.url)
        try:
            with bound_scope("run-x", "ide") as scope:
                scope.bind("web", config, [])
                assert [t.name for t in await pool.list_tools(name, config)]
                during = pool.session_info(name)
            await pool.list_tools("stored", config)  # the pool's next new session
            return during, pool.session_info(name), pool.session_info("stored")
        finally:
            await pool.aclose()

    try:
        during, after, other = asyncio.run(scenario())
    finally:
        server.stop()
    assert during is not None and during["alive"]
    assert after is None  # the run ended: its server's session is gone, not kept for the next run
    assert other is not None and other["alive"]
