"""ToolRegistry: the catalogue with its services wired: discovery, MCP servers, search, planning.

The catalogue itself (register, add, resolve, list, remove and their events) is `echo_tools.catalogue`;
the services are modules over it (`echo_tools.discovery`, `echo_tools.mcp.config`, `echo_tools.tool_search`,
`echo_tools.planning`) that never import this module.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from echo_tools.catalogue import DEFAULT_ALLOWED_MODULES, Catalogue
from echo_tools.discovery import MANIFEST_NAME, discover_local_tools
from echo_tools.mcp.bound import bound_tool
from echo_tools.models import ToolContext, ToolDef, ToolStatus
from echo_tools.schema import compiled, normalize_args

__all__ = ["DEFAULT_ALLOWED_MODULES", "MANIFEST_NAME", "ToolRegistry"]


class ToolRegistry(Catalogue):
    """The catalogue (`Catalogue`: register, add, resolve, list, remove; the same constructor arguments)
    with its services at hand: manifest discovery, MCP servers, ranked search, the dependency graph."""

    def resolve_for(self, ref: Any, context: ToolContext) -> ToolDef | None:
        """`resolve(ref)` as a call of `context` sees the catalogue: the tools of MCP servers its run (or the
        compile it belongs to) bound from a canvas come first (`echo_tools.mcp.bound`)."""
        return bound_tool(ref, context) or self.resolve(ref)

    def graph(self) -> dict[str, list[Any]]:
        """The dependency graph: `{"nodes": [ids], "edges": [[dependency, dependent], ...]}`."""
        from echo_tools.planning import dependency_graph

        return dependency_graph(self.list_all())

    def list_by_tags(self, tags: Iterable[str], *, match_all: bool = False) -> list[ToolDef]:
        """Tools carrying any (or, with `match_all`, every) of `tags`."""
        wanted = {t.casefold() for t in tags}
        out = []
        for tool in self.list_all():
            have = {t.casefold() for t in tool.tags}
            if (wanted <= have) if match_all else (wanted & have):
                out.append(tool)
        return out

    def search(self, query: str, k: int | None = None) -> list[ToolDef]:
        """Find tools by what they do.

        With `k`: the `k` most relevant tools, best first, ranked by BM25 over name, description, tags
        and capabilities (`echo_tools.tool_search`; a word no tool has matches the words it begins).
        Without: every tool whose id, name, description or tags contain every word of `query`
        (case-insensitive), by id (what `/tools/search` answers).

        Raises:
            ToolValidationError: the query is longer than 500 characters, or `k` is not 1 to 100.
        """
        from echo_tools.tool_search import check_query

        check_query(query, 1 if k is None else k)
        if k is not None:
            tools = self._tools
            return [
                tools[tool_id] for tool_id, _ in self._search_index().search(query, k) if tool_id in tools
            ]
        words = query.casefold().split()
        out = []
        for tool in self.list_all():
            text = " ".join([tool.tool_id, tool.name, tool.description, *tool.tags]).casefold()
            if all(w in text for w in words):
                out.append(tool)
        return out

    def _search_index(self) -> Any:
        from echo_tools.tool_search import SearchIndex

        self._refresh_if_changed()
        tools = self._tools
        cached = self._index
        # the dict itself, not its id: `reload` swaps in a new one, which may reuse a freed id
        if cached is None or cached[0] is not tools or cached[1] != self._generation:
            cached = self._index = (tools, self._generation, SearchIndex(list(tools.values())))
        return cached[2]

    def get_tools_for_agent(self, refs: Iterable[str]) -> list[ToolDef]:
        """The active tools among `refs` (ids or names), in order, unknown and inactive ones left out."""
        out: list[ToolDef] = []
        seen: set[str] = set()
        for ref in refs:
            tool = self.resolve(ref)
            if tool is not None and tool.status == ToolStatus.ACTIVE and tool.tool_id not in seen:
                seen.add(tool.tool_id)
                out.append(tool)
        return out

    def validate_tool_input(self, tool_id: str, data: Any) -> bool:
        """True when `data` (after normalising) is valid input for the tool.

        Raises:
            ToolNotFoundError: no such tool.
        """
        tool = self.require(tool_id)
        return compiled(tool, "input").is_valid(normalize_args(tool.input_schema, data))

    def input_errors(self, tool_id: str, data: Any) -> list[str]:
        """Readable reasons why `data` is not valid input (empty when it is)."""
        tool = self.require(tool_id)
        return compiled(tool, "input").errors(normalize_args(tool.input_schema, data))

    # -- discovery (echo_tools.discovery) -------------------------------------------------------------

    def discover_local_tools(self, dirs: Iterable[str | Path] | None = None) -> list[ToolDef]:
        """Register what changed in the `tool_manifest.json` folders (`echo_tools.discovery`)."""
        return discover_local_tools(self, dirs)

    # -- MCP servers (implemented in echo_tools.mcp.config) ------------------------------------------

    def add_mcp_server(self, name: str, config: Mapping[str, Any], *, auth: Any = None) -> list[ToolDef]:
        """Store an MCP server config (`mcpServers` entry shape), discover its tools and register them.

        `auth`: an `httpx.Auth` for an HTTP server's connections in this process, used as is (not stored).
        """
        from echo_tools.mcp.config import add_mcp_server

        return add_mcp_server(self, name, config, auth=auth)

    def load_mcp_config(self, path: str | Path) -> dict[str, list[ToolDef]]:
        """Add every server of an `{"mcpServers": {...}}` JSON file; returns the tools per server."""
        from echo_tools.mcp.config import load_mcp_config

        return load_mcp_config(self, path)

    def refresh_mcp_server(self, name: str) -> list[ToolDef]:
        """Re-list one server's tools: new ones registered, changed ones updated, vanished ones disabled."""
        from echo_tools.mcp.config import refresh_mcp_server

        return refresh_mcp_server(self, name)

    def list_mcp_servers(self) -> dict[str, dict[str, Any]]:
        """Every configured MCP server (stored ones included), with secret values redacted."""
        from echo_tools.mcp.config import list_mcp_servers

        return list_mcp_servers(self)

    def remove_mcp_server(self, name: str) -> list[str]:
        """Forget a server's config and disable its tools; returns the ids of the tools disabled."""
        from echo_tools.mcp.config import remove_mcp_server

        return remove_mcp_server(self, name)
