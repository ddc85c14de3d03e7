"""The interoperability matrix's server built with the MCP SDK 2.x (MCPServer): the twin of
`interop_v1.py`, written the 2.x way. Elicitation, sampling and roots are resolver dependencies, so the
same tool asks with a request to the client on a 2025-era connection and answers `InputRequiredResult`
over the 2026-07-28 revision.

Run as `python interop_v2.py` (stdio) or `python interop_v2.py --http PORT [--stateless]`.
"""

from __future__ import annotations

import json
import warnings
from typing import Annotated

from _serving import main
from mcp import MCPDeprecationWarning
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, ListRoots, MCPServer, Resolve, Sample
from mcp.types import CreateMessageResult, ListRootsResult, SamplingMessage, TextContent
from pydantic import BaseModel, Field

warnings.filterwarnings("ignore", category=MCPDeprecationWarning)  # logging, sampling, roots: deprecated

mcp = MCPServer("interop-v2", log_level="WARNING")


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
async def count(steps: int, ctx: Context) -> str:
    """Report progress `steps` times."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted {steps}"


@mcp.tool()
async def chatty(word: str, ctx: Context) -> str:
    """Send one log message."""
    await ctx.info(f"said {word}")
    return "logged"


def _ask() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


@mcp.tool()
async def ask_name(answer: Annotated[ElicitationResult[Name], Resolve(_ask)]) -> str:
    """Ask the person for a name (elicitation)."""
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name ({answer.action})"


def _sample(text: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarise: {text}"))
    return Sample([message], max_tokens=40)


@mcp.tool()
async def summarise(text: str, reply: Annotated[CreateMessageResult, Resolve(_sample)]) -> str:
    """Ask the client's model (sampling)."""
    return f"model said: {getattr(reply.content, 'text', '')}"


def _roots() -> ListRoots:
    return ListRoots()


@mcp.tool()
async def roots(listed: Annotated[ListRootsResult, Resolve(_roots)]) -> str:
    """The client's roots."""
    return json.dumps([str(root.uri) for root in listed.roots])


@mcp.tool()
def trace(ctx: Context) -> str:
    """The W3C traceparent the request carried in its _meta ("" without one)."""
    meta = ctx.request_context.meta or {}
    return str(meta.get("traceparent", ""))


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
