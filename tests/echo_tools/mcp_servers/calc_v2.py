"""The calc server's 2.x twin (MCPServer), for the in-process tests under the SDK 2.x
(`tests/echo_tools/_mcp_support.server_object`): the tools those tests call, answering as `calc_server.py`
does."""

from __future__ import annotations

import os
from typing import Annotated

from _serving import main
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

mcp = MCPServer("calc", log_level="WARNING")


class Stats(BaseModel):
    count: int
    total: float
    mean: float


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=True), title="Add numbers")
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=True))
def stats(values: list[float]) -> Stats:
    """Count, total and mean of a list of numbers."""
    total = sum(values)
    return Stats(count=len(values), total=total, mean=total / len(values) if values else 0.0)


@mcp.tool(structured_output=False)
def greet(name: str) -> str:
    """Plain text output."""
    return f"Hello, {name}!"


@mcp.tool()
def fail(message: str) -> str:
    """Always fails with the given message (an isError result; 2.x shows a `ToolError`'s text only)."""
    raise ToolError(message)


@mcp.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@mcp.tool()
def region(place: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})], ctx: Context) -> str:
    """Over 2026-07-28 HTTP the argument must come as the `Mcp-Param-Region` header too; answers the header."""
    headers = getattr(ctx, "headers", None) or {}
    return f"{place} (header {headers.get('mcp-param-region', '-')})"


@mcp.tool()
def old_tool() -> str:
    """Removed by `change_tools`."""
    return "old"


def new_tool(x: int) -> int:
    """Added by `change_tools`."""
    return x * 2


@mcp.tool()
async def change_tools(ctx: Context) -> str:
    """Remove `old_tool`, add `new_tool`, and tell the client: on a listen stream (2026-07-28) and as the
    bare notification of a 2025 revision (each is dropped where it does not apply)."""
    names = {tool.name for tool in await mcp.list_tools()}
    if "old_tool" in names:
        mcp.remove_tool("old_tool")
    if "new_tool" not in names:
        mcp.add_tool(new_tool, name="new_tool")
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "changed"


if __name__ == "__main__":
    main(mcp)
