"""The `mcp` backend: tools of MCP servers on pooled sessions, and EchoAI's connector service path.

`{server, tool}` calls go through one long-lived session per server (`echo_tools.mcp_sessions`). The
SDK's client-side output validation is skipped (the executor validates once); `structuredContent` is the
output when present, otherwise the text content (JSON parsed when it is JSON); other content blocks are
kept in the result's metadata; `isError` is a failure carrying the server's message. `{connector_id}`
posts `{connector_id, payload}` to `<ECHO_CONNECTOR_BASE_URL>/connectors/mcp/invoke`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import BackendOutput, ToolBackend
from echo_tools.errors import ToolConfigError, ToolExecutionError, ToolNotFoundError
from echo_tools.models import SideEffect, ToolDef, ToolType

if TYPE_CHECKING:
    from mcp import types

    from echo_tools.executor import ToolExecutor
    from echo_tools.mcp_sessions import MCPSessionPool
    from echo_tools.models import ToolContext

logger = logging.getLogger("echo_tools.mcp")

CONNECTOR_BASE_ENV = "ECHO_CONNECTOR_BASE_URL"
DEFAULT_CONNECTOR_BASE = "http://localhost:8000"
CONNECTOR_PATH = "/connectors/mcp/invoke"
# the SDK's own read timeout is only a backstop: the executor's deadline cancels the call first
_BACKSTOP_S = 5.0


class MCPBackend(ToolBackend):
    """Runs `mcp` tools for one executor; its sessions close with `executor.aclose()`."""

    def __init__(self, executor: ToolExecutor) -> None:
        self.executor = executor
        self._pool: MCPSessionPool | None = None
        self._lock = threading.Lock()
        self._connector_requests: dict[tuple[str, str], ToolDef] = {}  # the api tool posting for each

    @property
    def pool(self) -> MCPSessionPool:
        """The executor's session pool (created at the first MCP call)."""
        pool = self._pool
        if pool is None:
            from echo_tools.mcp_sessions import MCPSessionPool

            with self._lock:  # callers on several threads must share one pool, or sessions leak
                if self._pool is None:
                    self._pool = MCPSessionPool(self.executor.egress, on_tools_changed=self._refresh)
                pool = self._pool
        return pool

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        """Call the tool on its server's pooled session (or post it to the connector service)."""
        if "connector_id" in tool.execution_config:
            return await self._call_connector(tool, args, context)
        from echo_tools.mcp_config import server_config

        server, name = tool.execution_config["server"], tool.execution_config["tool"]
        try:
            config = server_config(self.executor.registry, server)
        except ToolNotFoundError as exc:  # the tool exists; what is missing is its server's config
            raise ToolConfigError(
                f"Tool {tool.tool_id!r}: its MCP server {server!r} is not configured; add it with "
                "registry.add_mcp_server() or `echo-tools mcp add`",
                tool_id=tool.tool_id,
                field="execution_config.server",
            ) from exc
        timeout_s = (context.timeout_ms or tool.timeout_ms) / 1000 + _BACKSTOP_S
        # a call lost with its connection is repeated on a fresh session only when repeating is harmless
        retry_lost = tool.side_effect in (SideEffect.PURE, SideEffect.IDEMPOTENT)
        result = await self.pool.call_tool(server, config, name, args, timeout_s, retry_lost=retry_lost)
        return tool_output(tool, result)

    async def _refresh(self, server: str) -> None:
        # runs on the background loop when the server sends tools/list_changed
        from echo_tools.mcp_config import apply_listing, server_config

        registry = self.executor.registry
        listing = await self.pool.list_tools(server, server_config(registry, server))
        tools = await asyncio.to_thread(apply_listing, registry, server, listing)
        logger.info("MCP server %r changed its tools; %d active now", server, len(tools))

    async def _call_connector(
        self, tool: ToolDef, args: dict[str, Any], context: ToolContext
    ) -> BackendOutput:
        # The connector service is an HTTP API: the `api` backend posts to it, with its egress check,
        # response cap, redirect handling and error mapping; this only says which route and body.
        connector_id = tool.execution_config["connector_id"]
        url = os.environ.get(CONNECTOR_BASE_ENV, DEFAULT_CONNECTOR_BASE).rstrip("/") + CONNECTOR_PATH
        request = self._connector_requests.get((tool.tool_id, url))
        if request is None or request.timeout_ms != tool.timeout_ms:
            request = ToolDef(
                tool_id=tool.tool_id,
                name=tool.name,
                tool_type=ToolType.API,
                timeout_ms=tool.timeout_ms,
                execution_config={
                    "url": url,
                    "method": "POST",
                    "body": {"connector_id": connector_id},
                    "timeout": tool.timeout_ms / 1000,
                },
            )
            self._connector_requests[(tool.tool_id, url)] = request
        try:
            answer = await self.executor.backend_for(ToolType.API).call(request, {"payload": args}, context)
        except ToolExecutionError as exc:
            raise ToolExecutionError(
                f"Connector {connector_id!r}: {exc.message}", tool_id=tool.tool_id
            ) from exc
        if isinstance(answer, BackendOutput):
            return BackendOutput(answer.output, {**answer.metadata, "connector_id": connector_id})
        return BackendOutput(answer, {"connector_id": connector_id})

    async def aclose(self) -> None:
        """Close every pooled session (stdio servers are asked to exit, then terminated)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            await pool.aclose()


def tool_output(tool: ToolDef, result: types.CallToolResult) -> BackendOutput:
    """Turn a `CallToolResult` into our output; `isError` raises `ToolExecutionError` with the server's text."""
    texts = [block.text for block in result.content if block.type == "text"]
    others = [
        block.model_dump(mode="json", by_alias=True, exclude_none=True)
        for block in result.content
        if block.type != "text"
    ]
    server, name = tool.execution_config["server"], tool.execution_config["tool"]
    if result.isError:
        message = "\n".join(texts) or "no message"
        raise ToolExecutionError(
            f"MCP tool {name!r} on server {server!r} failed: {message}", tool_id=tool.tool_id
        )
    if result.structuredContent is not None:
        output: Any = result.structuredContent
    elif len(texts) == 1:
        output = _json_or_text(texts[0])
    elif texts:
        output = [_json_or_text(t) for t in texts]
    else:
        output = None
    metadata: dict[str, Any] = {"mcp_server": server, "mcp_tool": name}
    if others:
        metadata["content"] = others
    return BackendOutput(output, metadata)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
