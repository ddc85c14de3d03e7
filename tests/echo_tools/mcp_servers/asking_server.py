"""A real MCP server (FastMCP) that asks its client while a tool runs: `sampling/createMessage`,
`elicitation/create` (form and URL) and `roots/list`. Each tool reports what the client answered, or the
client's error, as its JSON text.

Run as `python asking_server.py` for stdio, or `python asking_server.py --http PORT` for streamable HTTP
on 127.0.0.1 (PORT 0 picks a free port); then it prints `PORT <n>` once it listens.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from _serving import main
from mcp.server.fastmcp import Context, FastMCP
from mcp.shared.exceptions import McpError
from mcp.types import SamplingMessage, TextContent

mcp = FastMCP("asking", log_level="WARNING")

CONTACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "Your name"},
        "age": {"type": "integer", "minimum": 0, "description": "Your age"},
    },
    "required": ["name"],
}


@mcp.tool()
async def summarise(text: str, max_tokens: int = 50, ctx: Context = None) -> str:  # type: ignore[assignment]
    """Ask the client's model for a one-line summary of `text`."""
    try:
        reply = await ctx.session.create_message(
            [SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarise: {text}"))],
            max_tokens=max_tokens,
            system_prompt="Answer in one line.",
            related_request_id=ctx.request_id,
        )
    except McpError as exc:
        return json.dumps({"error": exc.error.message})
    return json.dumps({"text": getattr(reply.content, "text", None), "model": reply.model})


@mcp.tool()
async def summarise_times(text: str, times: int, ctx: Context = None) -> str:  # type: ignore[assignment]
    """Ask the client's model `times` times for one token each; how many were answered, and the refusal."""
    answered = 0
    for _ in range(times):
        reply = json.loads(await summarise(text, 1, ctx))
        if "error" in reply:
            return json.dumps({"answered": answered, "error": reply["error"]})
        answered += 1
    return json.dumps({"answered": answered})


@mcp.tool()
async def summarise_when(text: str, started: str, gate: str, ctx: Context = None) -> str:  # type: ignore[assignment]
    """Write the file `started`, wait until the file `gate` exists, then ask for a summary of `text`."""
    Path(started).write_text("started", encoding="utf-8")
    while not Path(gate).exists():
        await anyio.sleep(0.02)
    return await summarise(text, 50, ctx)


@mcp.tool()
async def ask_contact(ctx: Context = None, url: str = "") -> str:  # type: ignore[assignment]
    """Ask the person for a name and an age (a URL elicitation when `url` is given)."""
    try:
        if url:
            answer = await ctx.session.elicit_url(
                "Sign in at the page", url, "sign-in-1", related_request_id=ctx.request_id
            )
        else:
            answer = await ctx.session.elicit_form(
                "Who are you?", CONTACT_SCHEMA, related_request_id=ctx.request_id
            )
    except McpError as exc:
        return json.dumps({"error": exc.error.message})
    return json.dumps(answer.model_dump(mode="json", by_alias=True, exclude_none=True))


@mcp.tool()
async def roots(ctx: Context = None) -> str:  # type: ignore[assignment]
    """The client's roots (`roots/list`)."""
    try:
        listed = await ctx.session.list_roots()
    except McpError as exc:
        return json.dumps({"error": exc.error.message})
    return json.dumps([{"uri": str(r.uri), "name": r.name} for r in listed.roots])


if __name__ == "__main__":
    main(mcp)
