"""A real MCP server (low-level API) with one tool that requires MCP tasks and one plain tool."""

from __future__ import annotations

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

server = Server("tasks")


@server.list_tools()
async def list_tools() -> list[types.Tool]:
    schema = {"type": "object", "properties": {}}
    return [
        types.Tool(
            name="long_job", inputSchema=schema, execution=types.ToolExecution(taskSupport="required")
        ),
        types.Tool(name="quick", inputSchema=schema),
    ]


@server.call_tool()
async def call_tool(name: str, arguments: dict) -> list[types.TextContent]:
    return [types.TextContent(type="text", text=f"{name} ran")]


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
