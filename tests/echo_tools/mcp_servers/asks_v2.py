"""A low-level 2.x server (`mcp.server.Server`) that asks by `InputRequiredResult` itself, for the tests of
the 2026-07-28 multi-round trip (tests/echo_tools/test_mcp_input_required.py):

- `book(name)`: asks for a date (elicitation), then books; its text counts the calls that came without a
  `requestState` (a call started afresh) and the retries, so a test sees whether a resume re-ran it;
- `forever()`: asks again on every round (a server that never finishes);
- `stalling()`: answers "not done yet" (only a `requestState`) on every round;
- `ask_model(text)`: asks the client's model (sampling), `where()`: asks for the roots.

Run as `python asks_v2.py` (stdio) or `python asks_v2.py --http PORT [--stateless]`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
from mcp.server import Server, ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
    ListToolsResult,
    PaginatedRequestParams,
    SamplingMessage,
    TextContent,
    Tool,
)

COUNTS = {"fresh": 0, "retried": 0, "forever": 0}
DATE = {"type": "object", "properties": {"date": {"type": "string"}}, "required": ["date"]}
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _ask(message: str) -> ElicitRequest:
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=DATE))


def _text(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


async def list_tools(ctx: ServerRequestContext, params: PaginatedRequestParams | None) -> ListToolsResult:
    schema: dict[str, Any] = {"type": "object", "properties": {}}
    return ListToolsResult(
        tools=[
            Tool(name="book", input_schema=NAME, description="Book a table; asks for the date."),
            Tool(name="forever", input_schema=schema, description="Asks on every round."),
            Tool(name="stalling", input_schema=schema, description="Never done."),
            Tool(
                name="ask_model", input_schema={"type": "object", "properties": {"text": {"type": "string"}}}
            ),
            Tool(name="where", input_schema=schema, description="The client's roots."),
        ]
    )


async def call_tool(
    ctx: ServerRequestContext, params: CallToolRequestParams
) -> CallToolResult | InputRequiredResult:
    answers = params.input_responses or {}
    if params.name == "book":
        if params.request_state is None:
            COUNTS["fresh"] += 1
        else:
            COUNTS["retried"] += 1
        answer = answers.get("date")
        if not isinstance(answer, ElicitResult):
            return InputRequiredResult(input_requests={"date": _ask("Which date?")}, request_state="book-1")
        if answer.action != "accept" or not answer.content:
            return _text(f"not booked ({answer.action})")
        name = (params.arguments or {}).get("name")
        return _text(
            f"booked {name} on {answer.content['date']}; fresh {COUNTS['fresh']}, retried {COUNTS['retried']}"
        )
    if params.name == "forever":
        COUNTS["forever"] += 1
        return InputRequiredResult(
            input_requests={f"q{COUNTS['forever']}": _ask("Again?")}, request_state="more"
        )
    if params.name == "stalling":
        return InputRequiredResult(request_state="not-yet")
    if params.name == "ask_model":
        reply = answers.get("model")
        if not isinstance(reply, CreateMessageResult):
            text = (params.arguments or {}).get("text", "")
            message = SamplingMessage(
                role="user", content=TextContent(type="text", text=f"Summarise: {text}")
            )
            request = CreateMessageRequest(
                params=CreateMessageRequestParams(messages=[message], max_tokens=40)
            )
            return InputRequiredResult(input_requests={"model": request}, request_state="sampling")
        return _text(f"model said: {getattr(reply.content, 'text', '')}")
    if params.name == "where":
        listed = answers.get("roots")
        if not isinstance(listed, ListRootsResult):
            return InputRequiredResult(input_requests={"roots": ListRootsRequest()}, request_state="roots")
        return _text(json.dumps([str(root.uri) for root in listed.roots]))
    raise ValueError(f"unknown tool {params.name!r}")


server = Server("asks", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    if "--http" in sys.argv:
        from _serving import serve_http

        serve_http(server, int(sys.argv[sys.argv.index("--http") + 1]), stateless="--stateless" in sys.argv)
    else:
        anyio.run(main)
