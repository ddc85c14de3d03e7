"""A real MCP server whose answers are as large as asked: `large(megabytes)` returns that many MiB of text,
`small()` a few bytes. Run as `python large_server.py` (stdio) or `--http PORT` (streamable HTTP)."""

from __future__ import annotations

from _serving import main
from mcp.server.fastmcp import FastMCP

mcp = FastMCP("large", log_level="WARNING")


@mcp.tool()
def large(megabytes: int) -> str:
    """That many MiB of text."""
    return "x" * (megabytes * 1024 * 1024)


@mcp.tool()
def small() -> str:
    """A few bytes."""
    return "small"


if __name__ == "__main__":
    main(mcp)
