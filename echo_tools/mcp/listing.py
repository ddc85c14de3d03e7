"""What a server offers, listed: every page of `tools/list` (and the catalogue tools standing for its
resources and prompts), on the pooled session or on a short-lived one (`discover_tools`, `list_catalogue`:
opened, listed, closed, on the background loop).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.compat import mcp as compat
from echo_tools.errors import MCPConnectionError, ToolExecutionError
from echo_tools.mcp.connection import Connection, SessionBroken, on_background_loop

if TYPE_CHECKING:
    from mcp import types

    from echo_tools.egress import EgressPolicy

__all__ = [
    "CATALOGUE_META",
    "GET_PROMPT",
    "MAX_PAGES",
    "READ_RESOURCE",
    "catalogue_tools",
    "discover_tools",
    "list_all_tools",
    "list_catalogue",
]

MAX_PAGES = 1000
# catalogue tools standing for a server's resources and prompts (registered with its tools)
READ_RESOURCE, GET_PROMPT = "read_resource", "get_prompt"
CATALOGUE_META = "echo-tools/catalogue"


async def list_all_tools(conn: Connection, timeout_s: float) -> list[types.Tool]:
    """Every page of `tools/list` (at most `MAX_PAGES`), after the catalogue tools standing for the
    server's resources and prompts when it declares them (see `catalogue_tools`)."""
    from mcp import types

    tools = await _list_all(conn, types.ListToolsRequest, types.ListToolsResult, "tools", timeout_s)
    capabilities = compat.server_capabilities(conn.session) if conn.session else None
    resources = prompts = False
    if capabilities is not None and capabilities.resources is not None:
        # declared is not enough (FastMCP declares both always): the server must have something to read
        resources = await _offers(conn, types.ListResourcesRequest, types.ListResourcesResult, timeout_s)
        resources = resources or await _offers(
            conn, types.ListResourceTemplatesRequest, types.ListResourceTemplatesResult, timeout_s
        )
    if capabilities is not None and capabilities.prompts is not None:
        prompts = await _offers(conn, types.ListPromptsRequest, types.ListPromptsResult, timeout_s)
    return catalogue_tools(resources=resources, prompts=prompts) + tools


async def _offers(conn: Connection, request_type: Any, result_type: Any, timeout_s: float) -> bool:
    """Whether the first page of a `*/list` request names anything (a refused request: no)."""

    try:
        page = await conn.request(request_type(params=None), result_type, timeout_s)
    except ToolExecutionError:
        return False
    items = (compat.field(page, key) for key in ("resources", "resourceTemplates", "prompts"))
    return any(items)


async def _list_all(conn: Connection, request_type: Any, result_type: Any, key: str, timeout_s: float) -> Any:
    """Follow `nextCursor` through every page of a `*/list` request (at most `MAX_PAGES`)."""
    from mcp import types

    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await conn.request(request_type(params=params), result_type, timeout_s)
        items.extend(compat.field(page, key))
        cursor = compat.field(page, "nextCursor")
        if not cursor:
            return items
    raise MCPConnectionError(f"MCP server {conn.name!r} returned more than {MAX_PAGES} pages of {key}")


def catalogue_tools(*, resources: bool, prompts: bool) -> list[types.Tool]:
    """Tools standing for `resources/read` and `prompts/get` of a server offering resources or prompts
    (marked in their `_meta`, so the registry gives them the ids `mcp_<server>_read_resource` and
    `mcp_<server>_get_prompt`)."""
    from mcp import types

    out: list[types.Tool] = []
    if resources:
        schema = {
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "the resource's URI"}},
            "required": ["uri"],
        }
        description = (
            "Read one resource of this MCP server by its URI (a resource link a tool returned, or one "
            "the server lists)."
        )
        out.append(
            types.Tool(
                name=READ_RESOURCE,
                description=description,
                inputSchema=schema,
                annotations=types.ToolAnnotations(readOnlyHint=True),
                _meta={CATALOGUE_META: "resources/read"},
            )
        )
    if prompts:
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "the prompt's name"},
                "arguments": {
                    "type": "object",
                    "additionalProperties": {"type": "string"},
                    "description": "the prompt's arguments",
                },
            },
            "required": ["name"],
        }
        out.append(
            types.Tool(
                name=GET_PROMPT,
                description="Get one prompt of this MCP server, its arguments filled in.",
                inputSchema=schema,
                annotations=types.ToolAnnotations(readOnlyHint=True),
                _meta={CATALOGUE_META: "prompts/get"},
            )
        )
    return out


async def discover_tools(
    server: str, config: Mapping[str, Any], egress: EgressPolicy, timeout_s: float = 30.0
) -> list[types.Tool]:
    """List a server's tools on a short-lived session (opened, listed, closed) on the background loop."""

    async def run() -> list[types.Tool]:
        conn = Connection(server, config, egress)
        try:
            await conn.wait_ready()
            try:
                return await list_all_tools(conn, timeout_s)
            except SessionBroken as exc:
                raise MCPConnectionError(str(exc)) from None
        finally:
            await conn.close()

    return await on_background_loop(run)


async def list_catalogue(
    server: str, config: Mapping[str, Any], egress: EgressPolicy, kind: str, timeout_s: float = 30.0
) -> list[Any]:
    """A server's `resources` (and resource templates) or `prompts`, all pages, on a short-lived session.

    Raises:
        MCPConnectionError: the server could not be reached, or does not declare that capability.
    """
    from mcp import types

    async def run() -> list[Any]:
        conn = Connection(server, config, egress)
        try:
            session = await conn.wait_ready()
            capabilities = compat.server_capabilities(session)
            if getattr(capabilities, kind, None) is None:
                raise MCPConnectionError(f"MCP server {server!r} does not offer {kind}")
            try:
                if kind == "prompts":
                    return await _list_all(
                        conn, types.ListPromptsRequest, types.ListPromptsResult, "prompts", timeout_s
                    )
                items = await _list_all(
                    conn, types.ListResourcesRequest, types.ListResourcesResult, "resources", timeout_s
                )
                return items + await _list_all(
                    conn,
                    types.ListResourceTemplatesRequest,
                    types.ListResourceTemplatesResult,
                    "resourceTemplates",
                    timeout_s,
                )
            except SessionBroken as exc:
                raise MCPConnectionError(str(exc)) from None
        finally:
            await conn.close()

    return await on_background_loop(run)
