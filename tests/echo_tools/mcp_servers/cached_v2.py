"""A 2.x server (MCPServer) whose list results say they stay fresh for ten minutes (2026-07-28 cache hints:
`ttlMs`, `cacheScope` private), and count how often `tools/list` was asked for (`listed`)."""

from __future__ import annotations

from typing import Any

from _serving import main
from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer

ASKED = {"tools/list": 0}


class Counting(MCPServer):
    async def list_tools(self, *args: Any, **kwargs: Any) -> Any:
        ASKED["tools/list"] += 1
        return await super().list_tools(*args, **kwargs)


FRESH = CacheHint(ttl_ms=600_000)  # private: only for the same client's authorization
LISTS = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")
mcp = Counting("cached", log_level="WARNING", cache_hints=dict.fromkeys(LISTS, FRESH))  # type: ignore[arg-type]


@mcp.tool()
def listed() -> int:
    """How many times tools/list was asked for."""
    return ASKED["tools/list"]


if __name__ == "__main__":
    main(mcp)
