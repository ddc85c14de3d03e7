"""A real MCP server (FastMCP) returning every kind of content: image, audio, resource link, embedded
resources, base64 inside structured output; reporting progress and logging; offering resources and prompts.

Run as `python content_server.py` for stdio, or `python content_server.py --http PORT` for streamable HTTP
on 127.0.0.1 (PORT 0 picks a free port); then it prints `PORT <n>` once it listens.
"""

from __future__ import annotations

import base64

from _serving import main
from mcp.server.fastmcp import Context, FastMCP
from mcp.types import (
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from pydantic import AnyUrl

mcp = FastMCP("content", log_level="WARNING")

# a PNG header and 300 KB of bytes: big enough that pasting its base64 would flood a prompt
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 1200
PNG_B64 = base64.b64encode(PNG).decode()
WAV_B64 = base64.b64encode(b"RIFF" + b"\x00" * 4000).decode()
README = "The notes server keeps short notes."


@mcp.tool(structured_output=False)
def picture() -> list:
    """A caption and an image."""
    return [
        TextContent(type="text", text="a test card"),
        ImageContent(type="image", data=PNG_B64, mimeType="image/png"),
    ]


@mcp.tool(structured_output=False)
def sound() -> list:
    """An audio clip only."""
    return [AudioContent(type="audio", data=WAV_B64, mimeType="audio/wav")]


@mcp.tool(structured_output=False)
def link() -> list:
    """A link to a resource of this server."""
    return [
        TextContent(type="text", text="see the readme"),
        ResourceLink(
            type="resource_link", uri=AnyUrl("notes://readme"), name="readme", mimeType="text/plain", size=35
        ),
    ]


@mcp.tool(structured_output=False)
def embedded() -> list:
    """An embedded text resource and an embedded binary one."""
    return [
        EmbeddedResource(
            type="resource",
            resource=TextResourceContents(
                uri=AnyUrl("notes://inline"), mimeType="text/plain", text="inline note"
            ),
        ),
        EmbeddedResource(
            type="resource",
            resource=BlobResourceContents(uri=AnyUrl("notes://logo"), mimeType="image/png", blob=PNG_B64),
        ),
    ]


@mcp.tool()
def snapshot() -> dict:
    """Structured output holding base64 data."""
    return {"name": "snap", "png": PNG_B64}


@mcp.tool()
async def slow_job(steps: int, ctx: Context) -> str:
    """Reports progress at each step and logs a line at the start and at the end."""
    await ctx.info(f"starting {steps} steps")
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    await ctx.warning("done")
    return f"{steps} steps done"


@mcp.resource("notes://readme", mime_type="text/plain")
def readme() -> str:
    """What this server is."""
    return README


@mcp.resource("notes://logo", mime_type="image/png")
def logo() -> bytes:
    """A binary resource."""
    return PNG


@mcp.resource("notes://by-name/{name}")
def note(name: str) -> str:
    """A note by name (a resource template)."""
    return f"note {name}"


@mcp.prompt()
def summarise(topic: str) -> str:
    """Ask for a summary of a topic."""
    return f"Summarise {topic} in one sentence."


if __name__ == "__main__":
    main(mcp)
