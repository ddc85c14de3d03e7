"""The `mcp` backend: tools of MCP servers on pooled sessions, and EchoAI's connector service path.

`{server, tool}` calls go through one long-lived session per server (`echo_tools.mcp.sessions`). The
SDK's client-side output validation is skipped (the executor validates once); `structuredContent` is the
output when present, otherwise the text content (JSON parsed when it is JSON); the other content blocks
(image, audio, resource link, embedded resource) are kept whole in `metadata["content"]`, where the
adapters find them (`echo_tools.llm_text`); `isError` is a failure carrying the server's message. Each
call carries a progress token: the server's progress and log notifications become `tool.progress` and
`tool.log` events with the call's context ids. The catalogue tools `read_resource` and `get_prompt` send
`resources/read` and `prompts/get`. `{connector_id}` posts `{connector_id, payload}` to
`<ECHO_CONNECTOR_BASE_URL>/connectors/mcp/invoke`. An answer larger than the server's `max_result_bytes`
(default 8 MiB) fails the call and is not kept: over HTTP its reading stops at the bound; over stdio the
SDK has read it, and it is dropped here before it becomes an output, an event or history.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import BackendOutput, ToolBackend, config_error
from echo_tools.compat.mcp import field
from echo_tools.errors import ToolConfigError, ToolExecutionError, ToolNotFoundError
from echo_tools.events import ToolEvent, call_fields
from echo_tools.models import SideEffect, ToolDef, ToolType
from echo_tools.redaction import hide_secret_values, redact

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mcp import types

    from echo_tools.egress import EgressPolicy
    from echo_tools.executor import ToolExecutor
    from echo_tools.mcp.callbacks import CallHooks
    from echo_tools.mcp.sessions import Listener, MCPSessionPool
    from echo_tools.models import ToolContext

logger = logging.getLogger("echo_tools.mcp")

CONNECTOR_BASE_ENV = "ECHO_CONNECTOR_BASE_URL"
DEFAULT_CONNECTOR_BASE = "http://localhost:8000"
CONNECTOR_PATH = "/connectors/mcp/invoke"
# the SDK's own read timeout is only a backstop: the executor's deadline cancels the call first
_BACKSTOP_S = 5.0


class MCPBackend(ToolBackend):
    """Runs `mcp` tools for one executor; its sessions close with `executor.aclose()`."""

    executor: ToolExecutor  # more than a `BackendHost`: it registers what a server lists in the catalogue

    @classmethod
    def check_config(
        cls, tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
    ) -> None:
        config = tool.execution_config
        if "connector_id" in config:
            if not isinstance(config["connector_id"], str) or not config["connector_id"]:
                raise config_error(
                    tool, "execution_config.connector_id", "execution_config.connector_id must be a string"
                )
            return
        server, name = config.get("server"), config.get("tool")
        if not isinstance(server, str) or not server or not isinstance(name, str) or not name:
            raise config_error(
                tool,
                "execution_config",
                f"an mcp tool needs execution_config {{server, tool}} or {{connector_id}}, got {config!r}",
            )

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
            from echo_tools.mcp.sessions import MCPSessionPool

            with self._lock:  # callers on several threads must share one pool, or sessions leak
                if self._pool is None:
                    self._pool = MCPSessionPool(self.executor.egress, on_tools_changed=self._refresh)
                pool = self._pool
        return pool

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        """Call the tool on its server's pooled session (or post it to the connector service)."""
        if "connector_id" in tool.execution_config:
            return await self._call_connector(tool, args, context)
        from echo_tools.mcp.callbacks import hooks_for_call
        from echo_tools.mcp.config import server_config

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
        from echo_tools.mcp.auth import tool_session  # a tool's own credential: a session of its own

        server, config = tool_session(tool, server, config)
        timeout_s = (context.timeout_ms or tool.timeout_ms) / 1000 + _BACKSTOP_S
        listener = self._listener(tool, context)
        # what answers the server's sampling and elicitation requests during this call (the caller's model)
        hooks = hooks_for_call(server, tool.tool_id, config, listener, timeout_s, meter=context.budget)
        hooks.arguments = args
        method = tool.execution_config.get("method")
        if method is not None:
            return await self._catalogue_call(tool, method, server, config, args, timeout_s, listener, hooks)
        # a call lost with its connection is repeated on a fresh session only when repeating is harmless
        retry_lost = tool.side_effect in (SideEffect.PURE, SideEffect.IDEMPOTENT)
        try:
            result = await self.pool.call_tool(
                server, config, name, args, timeout_s, retry_lost=retry_lost, listener=listener, hooks=hooks
            )
        finally:
            if hooks.interrupted is not None:  # a LangGraph interrupt for the server's elicitation
                raise hooks.interrupted
        check_result_size(tool, server, result_size(result), config)
        output = tool_output(tool, result)
        if "credential" in config or "oauth" in config:  # a server may echo its credential back
            output = BackendOutput(redact(output.output), redact(output.metadata))
        return output

    def _listener(self, tool: ToolDef, context: ToolContext) -> Listener | None:
        """What turns the call's progress and log notifications into `tool.progress` / `tool.log` events.

        The notifications arrive on the background loop; each event is emitted in the caller's context
        (a copy taken here), so sinks reading context variables (LangGraph's stream writer) see the call's.
        """
        events = self.executor.events
        if not events.sinks:
            return None
        fields = call_fields(tool.tool_id, tool.name, tool.tool_type.value, context)
        server = tool.execution_config["server"]
        caller = contextvars.copy_context()

        def hear(kind: str, entry: dict[str, Any]) -> None:
            event = ToolEvent(type=f"tool.{kind}", metadata={"mcp_server": server, **entry}, **fields)
            caller.run(events.emit, event, on_loop=True)

        return hear

    async def _catalogue_call(
        self,
        tool: ToolDef,
        method: str,
        server: str,
        config: dict[str, Any],
        args: dict[str, Any],
        timeout_s: float,
        listener: Listener | None,
        hooks: CallHooks,
    ) -> BackendOutput:
        from mcp import types

        if method == "resources/read":

            def request() -> Any:
                return types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri=args["uri"]))

            read = await self.pool.request(
                server, config, request, types.ReadResourceResult, timeout_s, listener=listener, hooks=hooks
            )
            size = sum(
                len(getattr(item, "text", "") or getattr(item, "blob", "") or "") for item in read.contents
            )
            check_result_size(tool, server, size, config)
            return resource_output(server, args["uri"], read)
        if method == "prompts/get":

            def prompt_request() -> Any:
                params = types.GetPromptRequestParams(name=args["name"], arguments=args.get("arguments"))
                return types.GetPromptRequest(params=params)

            prompt = await self.pool.request(
                server,
                config,
                prompt_request,
                types.GetPromptResult,
                timeout_s,
                listener=listener,
                hooks=hooks,
            )
            output = prompt.model_dump(mode="json", by_alias=True, exclude_none=True)
            return BackendOutput(output, {"mcp_server": server, "mcp_prompt": args["name"]})
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: unknown MCP catalogue method {method!r}",
            tool_id=tool.tool_id,
            field="execution_config.method",
        )

    async def _refresh(self, server: str) -> None:
        # runs on the background loop when the server sends tools/list_changed
        from echo_tools.mcp.config import apply_listing, server_config

        registry = self.executor.registry
        server = server.partition("@")[0]  # a tool's own-credential session is its server's (tool_session)
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
        if (
            request is None
            or request.timeout_ms != tool.timeout_ms
            or request.execution_config.get("credential") != tool.execution_config.get("credential")
        ):
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
                    **{k: v for k, v in tool.execution_config.items() if k == "credential"},
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


def result_size(result: types.CallToolResult) -> int:
    """About how many bytes a result holds: its texts, binary data, embedded resources and structured
    content (without serialising the whole result again)."""
    size = 0
    for block in result.content:
        for name in ("text", "data"):
            size += len(getattr(block, name, None) or "")
        resource = getattr(block, "resource", None)
        if resource is not None:
            size += len(getattr(resource, "text", None) or getattr(resource, "blob", None) or "")
    structured = field(result, "structuredContent")
    if structured is not None:
        size += len(json.dumps(structured, default=str))
    return size


def check_result_size(tool: ToolDef, server: str, size: int, config: Mapping[str, Any]) -> None:
    """Fail the call when its answer passed the server's `max_result_bytes` (nothing of it is kept)."""
    from echo_tools.mcp.limits import max_result_bytes

    limit = max_result_bytes(config)
    if size > limit:
        raise ToolExecutionError(
            f"MCP server {server!r} answered {size} bytes, more than {limit} bytes (max_result_bytes of "
            "its config); nothing was kept",
            tool_id=tool.tool_id,
        )


def tool_output(tool: ToolDef, result: types.CallToolResult) -> BackendOutput:
    """Turn a `CallToolResult` into our output; `isError` raises `ToolExecutionError` with the server's text."""
    texts = [block.text for block in result.content if block.type == "text"]
    others = [
        block.model_dump(mode="json", by_alias=True, exclude_none=True)
        for block in result.content
        if block.type != "text"
    ]
    server, name = tool.execution_config["server"], tool.execution_config["tool"]
    if field(result, "isError"):
        message = hide_secret_values("\n".join(texts)) or "no message"
        raise ToolExecutionError(
            f"MCP tool {name!r} on server {server!r} failed: {message}", tool_id=tool.tool_id
        )
    if field(result, "structuredContent") is not None:
        output: Any = field(result, "structuredContent")
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


def resource_output(server: str, uri: str, read: types.ReadResourceResult) -> BackendOutput:
    """`resources/read`: its text as the output (one text: the text; several: a list of
    `{uri, mimeType, text}`); binary contents go to `metadata["content"]` as embedded resources."""
    texts, blobs = [], []
    for item in read.contents:
        dumped = item.model_dump(mode="json", by_alias=True, exclude_none=True)
        if "text" in dumped:
            texts.append(dumped)
        else:
            blobs.append({"type": "resource", "resource": dumped})
    output: Any = None
    if len(texts) == 1:
        output = texts[0]["text"]
    elif texts:
        output = texts
    metadata: dict[str, Any] = {"mcp_server": server, "mcp_resource": uri}
    if blobs:
        metadata["content"] = blobs
    return BackendOutput(output, metadata)


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
