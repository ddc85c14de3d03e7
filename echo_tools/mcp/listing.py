"""What a server offers, listed: every page of `tools/list` (and the catalogue tools standing for its
resources and prompts), on the pooled session or on a short-lived one (`discover_tools`, `list_catalogue`:
opened, listed, closed, on the background loop).

Over the 2026-07-28 revision a list result carries cache hints (`ttlMs`, `cacheScope`): a listing stays
fresh for the shortest `ttlMs` of its pages, and `discover_tools` / `list_catalogue` answer from it until
then without connecting (a `private` listing only for the same config, credential included; a `public`
one for any config reaching the same URL or command). `tools/list_changed` and a listing on the pooled
session replace it. Without hints (a 2025 revision, `ttlMs` 0) nothing is kept.
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


class Hints:
    """The cache hints (2026-07-28: `ttlMs`, `cacheScope`) of every page a listing read: the listing is
    fresh for the shortest `ttlMs`, and private when any page was."""

    def __init__(self) -> None:
        self.ttl_ms: int | None = None
        self.private = False

    def saw(self, page: Any) -> None:
        ttl = compat.field(page, "ttlMs")
        ttl = int(ttl) if isinstance(ttl, int | float) else 0  # no hint (a 2025 revision): not cached
        self.ttl_ms = ttl if self.ttl_ms is None else min(self.ttl_ms, ttl)
        self.private = self.private or compat.field(page, "cacheScope") != "public"


# (what, server, identity) -> (when it goes stale, the listing): listings a server said stay fresh
_FRESH: dict[tuple[str, ...], tuple[float, Any]] = {}
_FRESH_LIMIT = 256


def _identity(server: str, config: Mapping[str, Any], private: bool) -> str:
    """What a cached listing is shared by: a private one only by the same config (its credential, headers
    and environment included), a public one by every config reaching the same URL or command."""
    import hashlib
    import json

    shared = {k: config.get(k) for k in ("transport", "url", "command", "args")}
    chosen = dict(config) if private else shared
    return hashlib.sha256(json.dumps(chosen, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cached_listing(what: str, server: str, config: Mapping[str, Any]) -> Any:
    """A listing of `server` still fresh by its cache hints (private first, then public), or None."""
    import time

    now = time.monotonic()
    for private in (True, False):
        key = (what, server, _identity(server, config, private), str(private))
        held = _FRESH.get(key)
        if held is not None and held[0] > now:
            return held[1]
        _FRESH.pop(key, None)
    return None


def keep_listing(what: str, server: str, config: Mapping[str, Any], listing: Any, hints: Hints) -> None:
    """Keep `listing` for as long as its pages' hints say it stays fresh (not at all without a hint)."""
    import time

    forget_listings(server, what)
    if not hints.ttl_ms:
        return
    if len(_FRESH) >= _FRESH_LIMIT:
        _FRESH.pop(next(iter(_FRESH)))
    key = (what, server, _identity(server, config, hints.private), str(hints.private))
    _FRESH[key] = (time.monotonic() + hints.ttl_ms / 1000, listing)


def forget_listings(server: str, what: str | None = None) -> None:
    """Drop the cached listings of `server` (of one kind, or all: its tools changed)."""
    for key in [k for k in _FRESH if k[1] == server and (what is None or k[0] == what)]:
        _FRESH.pop(key, None)


async def list_all_tools(conn: Connection, timeout_s: float, hints: Hints | None = None) -> list[types.Tool]:
    """Every page of `tools/list` (at most `MAX_PAGES`), after the catalogue tools standing for the
    server's resources and prompts when it declares them (see `catalogue_tools`); `hints` collects the
    pages' cache hints."""
    from mcp import types

    hints = hints if hints is not None else Hints()
    tools = await _list_all(conn, types.ListToolsRequest, types.ListToolsResult, "tools", timeout_s, hints)
    capabilities = compat.server_capabilities(conn.session) if conn.session else None
    resources = prompts = False
    if capabilities is not None and capabilities.resources is not None:
        # declared is not enough (FastMCP declares both always): the server must have something to read
        resources = await _offers(
            conn, types.ListResourcesRequest, types.ListResourcesResult, timeout_s, hints
        )
        resources = resources or await _offers(
            conn, types.ListResourceTemplatesRequest, types.ListResourceTemplatesResult, timeout_s, hints
        )
    if capabilities is not None and capabilities.prompts is not None:
        prompts = await _offers(conn, types.ListPromptsRequest, types.ListPromptsResult, timeout_s, hints)
    return catalogue_tools(resources=resources, prompts=prompts) + tools


async def _offers(
    conn: Connection, request_type: Any, result_type: Any, timeout_s: float, hints: Hints
) -> bool:
    """Whether the first page of a `*/list` request names anything (a refused request: no)."""

    try:
        page = await conn.request(request_type(params=None), result_type, timeout_s)
    except ToolExecutionError:
        return False
    hints.saw(page)
    items = (compat.field(page, key) for key in ("resources", "resourceTemplates", "prompts"))
    return any(items)


async def _list_all(
    conn: Connection, request_type: Any, result_type: Any, key: str, timeout_s: float, hints: Hints
) -> Any:
    """Follow `nextCursor` through every page of a `*/list` request (at most `MAX_PAGES`)."""
    from mcp import types

    items: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await conn.request(request_type(params=params), result_type, timeout_s)
        hints.saw(page)
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
    """List a server's tools on a short-lived session (opened, listed, closed) on the background loop;
    a listing the server said stays fresh (2026-07-28 cache hints) is not asked for again until then."""

    async def run() -> list[types.Tool]:
        fresh = cached_listing("tools", server, config)
        if fresh is not None:
            return list(fresh)
        conn = Connection(server, config, egress)
        try:
            await conn.wait_ready()
            hints = Hints()
            try:
                tools = await list_all_tools(conn, timeout_s, hints)
            except SessionBroken as exc:
                raise MCPConnectionError(str(exc)) from None
            keep_listing("tools", server, config, tools, hints)
            return tools
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
        fresh = cached_listing(kind, server, config)
        if fresh is not None:
            return list(fresh)
        conn = Connection(server, config, egress)
        hints = Hints()
        try:
            session = await conn.wait_ready()
            capabilities = compat.server_capabilities(session)
            if getattr(capabilities, kind, None) is None:
                raise MCPConnectionError(f"MCP server {server!r} does not offer {kind}")
            try:
                if kind == "prompts":
                    items = await _list_all(
                        conn, types.ListPromptsRequest, types.ListPromptsResult, "prompts", timeout_s, hints
                    )
                else:
                    items = await _list_all(
                        conn,
                        types.ListResourcesRequest,
                        types.ListResourcesResult,
                        "resources",
                        timeout_s,
                        hints,
                    )
                    items += await _list_all(
                        conn,
                        types.ListResourceTemplatesRequest,
                        types.ListResourceTemplatesResult,
                        "resourceTemplates",
                        timeout_s,
                        hints,
                    )
            except SessionBroken as exc:
                raise MCPConnectionError(str(exc)) from None
            keep_listing(kind, server, config, items, hints)
            return items
        finally:
            await conn.close()

    return await on_background_loop(run)
