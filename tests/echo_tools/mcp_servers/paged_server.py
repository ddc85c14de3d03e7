"""A real MCP server whose 25 tools come in pages of 10 (`nextCursor`), over stdio.

FastMCP lists every tool in one page, so its low-level `tools/list` handler is replaced by a paging one.
"""

from __future__ import annotations

from mcp import types
from mcp.server.fastmcp import FastMCP

PAGE = 10
mcp = FastMCP("paged", log_level="WARNING")


def _make(i: int):  # noqa: ANN202 - a tiny tool factory
    def tool(x: int) -> int:
        return x + i

    tool.__name__ = f"plus_{i:02d}"
    tool.__doc__ = f"Add {i}."
    return tool


for _i in range(25):
    mcp.add_tool(_make(_i))


async def list_tools_paged(request: types.ListToolsRequest) -> types.ListToolsResult:
    # (the SDK types the parameter exactly; its own tool-cache lookup passes None: list everything)
    tools = await mcp.list_tools()
    if request is None:
        return types.ListToolsResult(tools=tools)
    cursor = request.params.cursor if request.params is not None else None
    start = int(cursor or 0)
    end = start + PAGE
    return types.ListToolsResult(tools=tools[start:end], nextCursor=str(end) if end < len(tools) else None)


mcp._mcp_server.list_tools()(list_tools_paged)

if __name__ == "__main__":
    mcp.run("stdio")
