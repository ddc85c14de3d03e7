"""A real MCP server for the tests (FastMCP): arithmetic, structured output, errors, sleeps, crashes.

Run as `python calc_server.py` for stdio, or `python calc_server.py --http PORT` for streamable HTTP
(`/mcp`) and the older SSE transport (`/sse`) on 127.0.0.1 (PORT 0 picks a free port); then it prints
`PORT <n>` once it listens.
"""

from __future__ import annotations

import os

import anyio
from _serving import main
from mcp.server.fastmcp import Context, FastMCP, Image
from mcp.types import ToolAnnotations
from pydantic import BaseModel

mcp = FastMCP("calc", log_level="WARNING")

_events: dict[str, anyio.Event] = {}  # marker -> set when the sleep carrying it was cancelled
_arrivals: dict[str, int] = {}
_gates: dict[str, anyio.Event] = {}


def _event(marker: str) -> anyio.Event:
    return _events.setdefault(marker, anyio.Event())


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


@mcp.tool(structured_output=False)
def as_json(key: str, value: int) -> str:
    """Text content that is JSON."""
    return f'{{"{key}": {value}}}'


@mcp.tool(structured_output=False)
def two_texts() -> list[str]:
    """Two text blocks."""
    return ["first", "2"]


@mcp.tool(structured_output=False)
def picture() -> list:
    """A text block and an image block."""
    return ["a red dot", Image(data=b"\x89PNG\r\n\x1a\nfake", format="png")]


@mcp.tool()
def fail(message: str) -> str:
    """Always fails with the given message (an isError result)."""
    raise ValueError(message)


@mcp.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@mcp.tool()
async def gather(key: str, count: int) -> int:
    """Wait until `count` calls with `key` are in flight at once, then return the pid (bounded: 20 s)."""
    _arrivals[key] = _arrivals.get(key, 0) + 1
    gate = _gates.setdefault(key, anyio.Event())
    if _arrivals[key] >= count:
        gate.set()
    with anyio.fail_after(20):
        await gate.wait()
    return os.getpid()


@mcp.tool()
async def sleep(seconds: float, marker: str) -> str:
    """Sleep; when cancelled, record it under `marker` (see `wait_cancelled`)."""
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _event(marker).set()
        raise
    return "slept"


@mcp.tool()
async def wait_cancelled(marker: str, timeout: float) -> bool:
    """True once the sleep carrying `marker` was cancelled; False after `timeout` seconds."""
    with anyio.move_on_after(timeout):
        await _event(marker).wait()
        return True
    return False


@mcp.tool()
def env_value(name: str) -> str:
    """The server process's environment variable `name` ("" when unset)."""
    return os.environ.get(name, "")


@mcp.tool()
def header(name: str, ctx: Context) -> str:
    """The HTTP request header `name` ("" when unset or over stdio)."""
    request = ctx.request_context.request
    return request.headers.get(name, "") if request is not None else ""


@mcp.tool()
def crash() -> str:
    """Kill the server process at once."""
    os._exit(3)


@mcp.tool()
def old_tool() -> str:
    """Removed by `change_tools`."""
    return "old"


def new_tool(x: int) -> int:
    """Added by `change_tools`."""
    return x * 2


@mcp.tool()
async def change_tools(ctx: Context) -> str:
    """Remove `old_tool`, add `new_tool`, and tell the client (notifications/tools/list_changed)."""
    if mcp._tool_manager.get_tool("old_tool") is not None:
        mcp.remove_tool("old_tool")
    if mcp._tool_manager.get_tool("new_tool") is None:
        mcp.add_tool(new_tool, name="new_tool")
    await ctx.session.send_tool_list_changed()
    return "changed"


if __name__ == "__main__":
    main(mcp, sse=True)
