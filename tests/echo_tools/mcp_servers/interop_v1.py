"""The interoperability matrix's server built with the MCP SDK 1.x (FastMCP): a text tool, a structured
tool, progress, logs, elicitation, sampling, roots, a resource and a prompt. Its twin `interop_v2.py` is
built with 2.x; both answer alike, so tests/echo_tools/test_mcp_interop.py asserts the same of each.

Run as `python interop_v1.py` (stdio) or `python interop_v1.py --http PORT [--stateless]`.
"""

from __future__ import annotations

import json

from _serving import main
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel, Field

mcp = FastMCP("interop-v1", log_level="WARNING")


class Stats(BaseModel):
    count: int
    total: float


class Name(BaseModel):
    name: str = Field(description="Your name")


@mcp.tool(structured_output=False)
def echo(text: str) -> str:
    """Plain text back."""
    return f"echo: {text}"


@mcp.tool()
def stats(values: list[float]) -> Stats:
    """Structured output."""
    return Stats(count=len(values), total=sum(values))


@mcp.tool()
async def count(steps: int, ctx: Context) -> str:  # type: ignore[type-arg]
    """Report progress `steps` times."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted {steps}"


@mcp.tool()
async def chatty(word: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Send one log message."""
    await ctx.info(f"said {word}")
    return "logged"


@mcp.tool()
async def ask_name(ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the person for a name (elicitation)."""
    try:
        answer = await ctx.elicit("What is your name?", Name)
    except McpError as exc:
        return f"error: {exc.error.message}"
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


@mcp.tool()
async def summarise(text: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Ask the client's model (sampling)."""
    try:
        reply = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarise: {text}"))],
            max_tokens=40,
            related_request_id=ctx.request_id,
        )
    except McpError as exc:
        return f"error: {exc.error.message}"
    return f"model said: {getattr(reply.content, 'text', '')}"


@mcp.tool()
async def roots(ctx: Context) -> str:  # type: ignore[type-arg]
    """The client's roots."""
    try:
        listed = await ctx.session.list_roots()
    except McpError as exc:
        return f"error: {exc.error.message}"
    return json.dumps([str(root.uri) for root in listed.roots])


@mcp.tool()
def trace(ctx: Context) -> str:  # type: ignore[type-arg]
    """The W3C traceparent the request carried in its _meta ("" without one)."""
    meta = ctx.request_context.meta
    extra = (meta.model_extra or {}) if meta is not None else {}
    return str(extra.get("traceparent", ""))


@mcp.resource("notes://readme", mime_type="text/plain")
def readme() -> str:
    """What this server is."""
    return "interop notes"


@mcp.prompt()
def greeting(name: str) -> str:
    """A greeting prompt."""
    return f"Say hello to {name}"


if __name__ == "__main__":
    main(mcp)
