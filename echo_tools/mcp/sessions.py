"""Long-lived MCP client sessions: one per server, owned by one task on the process-wide background loop.

`MCPSessionPool` opens a server's session (`echo_tools.mcp.connection.Connection`) at its first use,
shares it between concurrent calls, replaces it once transparently when it was found dead before the
request was sent, and cancels a call the caller gave up on (1.x: `notifications/cancelled`, which that SDK
does not send by itself; 2.x cancels by itself).
Calls from any other event loop or thread hop to the background loop, so a session never crosses loops.
Discovery paginates `tools/list` on a short-lived session (`echo_tools.mcp.listing`, its names importable
from here too). The server's own requests (sampling, elicitation, roots) are answered by
`echo_tools.mcp.callbacks`, for the call in flight that they belong to.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.errors import MCPConnectionError
from echo_tools.mcp.bound import bound_config, is_bound
from echo_tools.mcp.connection import (
    CLOSE_TIMEOUT_S,
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_MAX_CONCURRENCY,
    Connection,
    Listener,
    Lost,
    NotSent,
    R,
    SessionBroken,
    on_background_loop,
)
from echo_tools.mcp.listing import (
    CATALOGUE_META,
    GET_PROMPT,
    MAX_PAGES,
    READ_RESOURCE,
    Hints,
    catalogue_tools,
    discover_tools,
    keep_listing,
    list_all_tools,
    list_catalogue,
)

if TYPE_CHECKING:
    from mcp import types

    from echo_tools.egress import EgressPolicy
    from echo_tools.mcp.callbacks import CallHooks

__all__ = [
    "CATALOGUE_META",
    "CLOSE_TIMEOUT_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_CONCURRENCY",
    "GET_PROMPT",
    "Listener",
    "MAX_PAGES",
    "MCPSessionPool",
    "READ_RESOURCE",
    "ToolsChanged",
    "catalogue_tools",
    "discover_tools",
    "list_all_tools",
    "list_catalogue",
    "on_background_loop",
]

logger = logging.getLogger("echo_tools.mcp")

ToolsChanged = Callable[[str], Awaitable[None]]


class MCPSessionPool:
    """One long-lived session per server name, on the background loop, shared by concurrent calls.

    Args:
        egress: the policy URL servers must pass (checked with DNS resolution at each connect).
        on_tools_changed: awaited on the background loop when a server sends `tools/list_changed`.
    """

    def __init__(self, egress: EgressPolicy, *, on_tools_changed: ToolsChanged | None = None) -> None:
        self.egress = egress
        self._on_tools_changed = on_tools_changed
        self._conns: dict[str, Connection] = {}
        self._refreshing: dict[str, asyncio.Task[None]] = {}
        self._again: set[str] = set()
        self._closed = False

    async def call_tool(
        self,
        server: str,
        config: Mapping[str, Any],
        tool: str,
        arguments: dict[str, Any],
        timeout_s: float,
        *,
        retry_lost: bool = False,
        listener: Listener | None = None,
        hooks: CallHooks | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> types.CallToolResult:
        """`tools/call` on the server's pooled session, without the SDK's client-side output validation.

        A session found dead before the request left is replaced once, transparently. A connection lost
        while the call was in flight is retried on a fresh session only with `retry_lost` (tools the
        server marks read-only or idempotent): the server may already have done the work. `listener`
        hears the call's progress and log notifications (on the background loop); `hooks` answer the
        server's sampling, elicitation and roots requests during the call (over the 2026-07-28 revision:
        the `InputRequiredResult` it answers with); `meta` goes into the request's `_meta` (trace context).
        """
        from mcp import types

        return await self.request(
            server,
            config,
            lambda: types.CallToolRequest(params=types.CallToolRequestParams(name=tool, arguments=arguments)),
            types.CallToolResult,
            timeout_s,
            retry_lost=retry_lost,
            listener=listener,
            hooks=hooks,
            meta=meta,
        )

    async def request(
        self,
        server: str,
        config: Mapping[str, Any],
        message: Callable[[], Any],
        result_type: type[R],
        timeout_s: float,
        *,
        retry_lost: bool = True,
        listener: Listener | None = None,
        hooks: CallHooks | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> R:
        """Any request (`resources/read`, `prompts/get`, ...) on the server's pooled session; `message`
        makes the bare SDK request model (made again for a second try: a request is changed by sending)."""
        if meta is None:
            from echo_tools.mcp.trace import trace_meta

            meta = trace_meta()  # read here, in the caller's context, before the hop to the background loop

        async def run() -> R:
            conn = self._conns.get(server)
            if conn is None or not conn.alive or conn.session is None or conn.config != config:
                conn = await self._connection(server, config)
            try:
                return await conn.request(message(), result_type, timeout_s, listener, hooks, meta)
            except NotSent:
                pass  # the server died or the session expired while idle: reconnect once, transparently
            except Lost as exc:
                if not retry_lost:
                    raise MCPConnectionError(str(exc)) from None
            conn = await self._connection(server, config)
            try:
                return await conn.request(message(), result_type, timeout_s, listener, hooks, meta)
            except SessionBroken as exc:
                raise MCPConnectionError(str(exc)) from None

        return await on_background_loop(run)

    async def list_tools(
        self, server: str, config: Mapping[str, Any], timeout_s: float = 30.0
    ) -> list[types.Tool]:
        """Every tool of the server (all pages), on its pooled session (retried once on a fresh one)."""

        async def run() -> list[types.Tool]:
            error: SessionBroken | None = None
            for _ in (1, 2):
                conn = await self._connection(server, config)
                hints = Hints()
                try:
                    tools = await list_all_tools(conn, timeout_s, hints)
                except SessionBroken as exc:
                    error = exc
                    continue
                keep_listing("tools", server, config, tools, hints)  # the newest listing replaces a kept one
                return tools
            raise MCPConnectionError(str(error))

        return await on_background_loop(run)

    async def _connection(self, server: str, config: Mapping[str, Any]) -> Connection:
        if self._closed:
            raise MCPConnectionError(f"MCP server {server!r}: the session pool is closed")
        conn = self._conns.get(server)
        if conn is not None and (not conn.alive or conn.config != config):
            self._conns.pop(server, None)
            conn.discard()
            conn = None
        if conn is None:
            self._close_unbound()
            conn = Connection(server, config, self.egress, self._tools_changed)
            self._conns[server] = conn
        try:
            await conn.wait_ready()
        except MCPConnectionError:
            if self._conns.get(server) is conn:
                del self._conns[server]
            raise
        return conn

    def _close_unbound(self) -> None:
        """Close the sessions of servers bound for runs that have ended (`echo_tools.mcp.bound`): a bound
        server's session lasts no longer than its run, plus the time to the pool's next new session."""
        for name in [n for n in self._conns if is_bound(n) and bound_config(n) is None]:
            self._conns.pop(name).discard()

    def _tools_changed(self, server: str) -> None:
        if self._on_tools_changed is None or self._closed:
            return
        running = self._refreshing.get(server)
        if running is not None and not running.done():
            self._again.add(server)  # changed again while listing: list once more when this one ends
            return
        self._refreshing[server] = asyncio.get_running_loop().create_task(self._refresh(server))

    async def _refresh(self, server: str) -> None:
        assert self._on_tools_changed is not None
        while True:
            self._again.discard(server)
            try:
                await self._on_tools_changed(server)
            except Exception as exc:  # boundary: a failed refresh must not break the session that asked
                logger.warning("MCP server %r: refreshing the tool list failed: %s", server, exc)
            if server not in self._again or self._closed:
                return

    def session_info(self, server: str) -> dict[str, Any] | None:
        """What the pool holds for `server` (alive, target, the protocol revision it negotiated), or None
        when no session is open."""
        conn = self._conns.get(server)
        if conn is None:
            return None
        return {"alive": conn.alive, "target": conn.target, "error": conn.error, "protocol": conn.protocol}

    async def aclose(self) -> None:
        """Close every session (stdio servers are asked to exit, then terminated)."""

        async def run() -> None:
            self._closed = True
            for task in self._refreshing.values():
                task.cancel()
            conns, self._conns = list(self._conns.values()), {}
            await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)

        await on_background_loop(run)
