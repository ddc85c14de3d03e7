"""MCP servers a canvas names by URL for one compile or run only: listed, bound, never stored.

`/workflows/compile` stores nothing, and a principal without the `mcp` action may not add MCP servers;
a canvas `mcp_server` entry with `serverUrl` then binds for that compile or run only (DESIGN, "The gate").
`bound_scope(run_id, principal)` opens the set of such servers for the work running in the block. The
entry's server is listed through the registry's egress policy (its private-network rules included) and
its tools live in the set, never in the catalogue, its store or its listings: the executor finds them for
calls of that run made by that principal (`bound_tool`), the MCP backend finds their config
(`echo_tools.mcp.config.server_config`), and a `tools/list_changed` from such a server registers nothing.
A bound server's name is `bound-<digest of its URL>-<serverId>`, never a stored server's; it is forgotten
when the last block that bound it ends.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo_tools.models import ToolContext, ToolDef

__all__ = [
    "BoundSet",
    "bound_config",
    "bound_in_scope",
    "bound_name",
    "bound_scope",
    "bound_tool",
    "current_scope",
    "is_bound",
]


class BoundSet:
    """The MCP servers bound for one compile or run: `servers` (name -> config), `tools` (id -> ToolDef)
    and `by_entry` ((serverId, url) -> the bound server's name), for `run_id` and `principal` (a name)."""

    def __init__(self, run_id: str | None, principal: str | None) -> None:
        self.run_id = run_id
        self.principal = principal
        self.servers: dict[str, dict[str, Any]] = {}
        self.tools: dict[str, ToolDef] = {}
        self.by_entry: dict[tuple[str, str], str] = {}

    def bind(self, server: str, config: dict[str, Any], tools: list[ToolDef]) -> list[ToolDef]:
        """Bind `server` (its `config`, with its `url`) and its `tools` (`tool_defs` of its listing under
        `bound_name`); returns them with LLM-facing names `<server>_<tool>`."""
        url = str(config.get("url"))
        name = bound_name(server, url)
        tools = [
            tool.model_copy(
                update={
                    "name": f"{server}_{tool.execution_config['tool']}"[:190],
                    "tags": [*tool.tags, "mcp_bound"],
                }
            )
            for tool in tools
        ]
        with _LOCK:
            if name not in self.servers:
                held = _SERVERS.get(name)
                _SERVERS[name] = (config, (held[1] if held else 0) + 1)
            self.servers[name] = config
            self.tools.update((t.tool_id, t) for t in tools)
            self.by_entry[(server, url)] = name
        return tools

    def tool_for(self, server: str, url: str, operation: str) -> ToolDef | None:
        """The bound tool serving `operation` of the entry `(server, url)`, when that entry is bound."""
        name = self.by_entry.get((server, url))
        for tool in self.tools.values():
            cfg = tool.execution_config
            if name is not None and cfg.get("server") == name and cfg.get("tool") == operation:
                return tool
        return None

    def bound_entry(self, server: str, url: str) -> bool:
        return (server, url) in self.by_entry


_LOCK = threading.Lock()
_SCOPE: ContextVar[BoundSet | None] = ContextVar("echo_tools_bound_mcp", default=None)
_BY_RUN: dict[str, BoundSet] = {}
_SERVERS: dict[str, tuple[dict[str, Any], int]] = {}  # bound name -> (config, blocks holding it)


@contextmanager
def bound_scope(run_id: str | None = None, principal: str | None = None) -> Iterator[BoundSet]:
    """While the block runs, canvas MCP servers bound by URL go into the returned set (the compile's or
    the run's), and the calls of run `run_id` by `principal` find their tools; all forgotten at the end."""
    scope = BoundSet(run_id, principal)
    token = _SCOPE.set(scope)
    if run_id is not None:
        with _LOCK:
            _BY_RUN[run_id] = scope
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
        with _LOCK:
            if run_id is not None and _BY_RUN.get(run_id) is scope:
                del _BY_RUN[run_id]
            for name in scope.servers:
                config, holders = _SERVERS.get(name, ({}, 1))
                if holders <= 1:
                    _SERVERS.pop(name, None)
                else:
                    _SERVERS[name] = (config, holders - 1)


def bound_name(server: str, url: str) -> str:
    """The name server `server` at `url` is bound under: `bound-<digest of the URL>-<server>`."""
    return f"bound-{hashlib.sha256(url.encode()).hexdigest()[:10]}-{server}"[:64].rstrip("-_")


def current_scope() -> BoundSet | None:
    """The set of the compile or run working in this context, or None outside `bound_scope`."""
    return _SCOPE.get()


def bound_tool(ref: Any, context: ToolContext) -> ToolDef | None:
    """The bound tool `ref` (an id) names for a call of `context`'s run by the principal that bound it
    (or in the binding block's own context); None at once when nothing is bound anywhere."""
    if not _SERVERS or not isinstance(ref, str):
        return None
    scope = _BY_RUN.get(context.run_id) if context.run_id else None
    if scope is None or scope.principal != context.principal:
        scope = _SCOPE.get()
    return None if scope is None else scope.tools.get(ref)


def bound_in_scope(ref: Any) -> ToolDef | None:
    """The tool id `ref` names among the servers bound by the compile or run working in this context."""
    scope = _SCOPE.get()
    return scope.tools.get(ref) if scope is not None and isinstance(ref, str) else None


def bound_config(name: str) -> dict[str, Any] | None:
    """The config of bound server `name` while some block holds it, else None."""
    held = _SERVERS.get(name)
    return None if held is None else dict(held[0])


def is_bound(name: str) -> bool:
    """Whether `name` is a bound server's (`bound-...`): such a server's tools are never registered."""
    return name.startswith("bound-")
