"""Canvas `mcp_server` tool entries `{serverId, operationName, serverUrl?}`: the MCP tool each one binds.

The registered MCP tool of that server and operation binds. When the server is not registered and the
entry gives `serverUrl`, the server is listed first (under the registry's egress policy: a loopback or
private URL is refused unless the policy allows it) and added only when it serves the operation, so an
entry that cannot bind stores nothing. It is added (owned by the principal acting now) only when that
principal may store MCP servers (the `mcp` action; the CLI and in-process Python may); in a compile, or
for a principal without `mcp`, it binds for that compile or run only (`echo_tools.mcp.bound`) and nothing
is stored. Every other case is a reason the caller reports, naming the field.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.errors import EgressDeniedError, ToolError
from echo_tools.gate import acting, may_store

if TYPE_CHECKING:
    from echo_tools.models import ToolDef
    from echo_tools.registry import ToolRegistry

__all__ = ["match_mcp_tool", "mcp_server_tool"]

_LISTING_TIMEOUT_S = 30.0


def match_mcp_tool(registry: ToolRegistry | None, server: Any, operation: Any) -> ToolDef | None:
    """The registered MCP tool serving `operation` of `server` (server names compare lower-cased)."""
    if registry is None or not isinstance(server, str) or not server or not operation:
        return None
    names = {server, server.strip().lower()}
    for tool in registry.list_by_type("mcp"):
        cfg = tool.execution_config
        if cfg.get("server") in names and cfg.get("tool") == operation:
            return tool
    return None


def mcp_server_tool(
    registry: ToolRegistry | None, config: Mapping[str, Any]
) -> tuple[ToolDef | None, str, str]:
    """The MCP tool an `mcp_server` entry's `config` binds: `(tool, "", "")`, or `(None, field, why)`.

    `field` is the config key at fault (`serverId`, `operationName`, `serverUrl`).
    """
    server, operation, url = config.get("serverId"), config.get("operationName"), config.get("serverUrl")
    if not (isinstance(server, str) and server.strip() and isinstance(operation, str) and operation.strip()):
        field = "serverId" if not (isinstance(server, str) and server.strip()) else "operationName"
        return (
            None,
            field,
            (f"an MCP Server tool needs config.serverId and config.operationName, got {dict(config)!r:.160}"),
        )
    if registry is None:
        return None, "serverId", f"MCP server {server!r} cannot be bound: there is no tool registry"
    tool = match_mcp_tool(registry, server, operation)
    if tool is not None:
        return tool, "", ""
    known = registry.list_mcp_servers()
    if server.strip().lower() in known or server in known:
        entry = known.get(server.strip().lower()) or known[server]
        operations = sorted(
            str(t.execution_config.get("tool"))
            for t in registry.list_by_type("mcp")
            if t.tool_id in entry.get("tools", [])
        )
        return None, "operationName", _no_operation(server, operation, operations)
    if url in (None, ""):
        return (
            None,
            "serverId",
            (
                f"no MCP server {server!r} is registered (registered: {sorted(known)}); add it "
                "(`echo-tools mcp add`) or give the entry config.serverUrl"
            ),
        )
    return _add_server(registry, server, operation, url)


def _add_server(
    registry: ToolRegistry, server: str, operation: str, url: Any
) -> tuple[ToolDef | None, str, str]:
    from echo_tools.mcp.bound import bound_name, current_scope
    from echo_tools.mcp.config import check_server_config, check_server_name, register_server, tool_defs
    from echo_tools.mcp.sessions import discover_tools
    from echo_tools.runtime import run_sync

    if not isinstance(url, str):
        return None, "serverUrl", f"config.serverUrl must be an http(s) URL, got {url!r:.80}"
    # a compile stores nothing, and over HTTP only a principal granted `mcp` adds servers: otherwise the
    # server binds for this compile or run only (`echo_tools.mcp.bound`)
    scope = None if may_store("mcp") else current_scope()
    if scope is None and not may_store("mcp"):
        return (
            None,
            "serverUrl",
            f"MCP server {server!r} is not registered and {acting().name!r} may not add one from a canvas here "
            "(it needs the 'mcp' action); ask the operator to add it (`echo-tools mcp add`)",
        )
    try:
        name = check_server_name(server)
        if scope is not None and scope.bound_entry(name, url):  # bound earlier in this compile or run
            tool = scope.tool_for(name, url, operation)
            if tool is not None:
                return tool, "", ""
            known = sorted(str(t.execution_config.get("tool")) for t in scope.tools.values()
                           if t.execution_config.get("server") == bound_name(name, url))  # fmt: skip
            return None, "operationName", _no_operation(server, operation, known)
        checked = check_server_config(name, {"url": url})
        registry.egress.check_url(url)  # the literal address now; names are resolved and checked at connect
        listing = run_sync(discover_tools(name, checked, registry.egress), timeout=_LISTING_TIMEOUT_S)
    except EgressDeniedError as exc:
        return None, "serverUrl", f"config.serverUrl {url!r} is refused: {exc}"
    except TimeoutError:
        return (
            None,
            "serverUrl",
            (f"MCP server {server!r} at {url!r} did not list its tools within {_LISTING_TIMEOUT_S:g} s"),
        )
    except ToolError as exc:
        return None, "serverUrl", f"MCP server {server!r} at {url!r} cannot be added: {exc}"
    operations = sorted(t.name for t in listing)
    if operation not in operations:
        return None, "operationName", _no_operation(server, operation, operations) + "; nothing was added"
    if scope is not None:  # listed under its bound name: no stored server's sessions or tools
        scope.bind(name, checked, tool_defs(bound_name(name, url), listing))
        return scope.tool_for(name, url, operation), "", ""
    try:
        register_server(registry, name, checked, listing)  # owned by the principal acting now
    except ToolError as exc:
        return None, "serverUrl", f"MCP server {server!r} at {url!r} cannot be added: {exc}"
    tool = match_mcp_tool(registry, name, operation)
    if tool is None:  # registered, but its tool could not be (a name clash): the listing's problem says so
        return None, "operationName", f"MCP server {server!r} was added but its tool {operation!r} was not"
    return tool, "", ""


def _no_operation(server: str, operation: str, operations: list[str]) -> str:
    close = difflib.get_close_matches(operation, operations, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"MCP server {server!r} has no operation {operation!r} (its operations: {operations}){hint}"
