"""Streaming tools: a tool function that is a generator or an async generator streams its output.

Each chunk is a `tool.output.delta` event (the CLI, the SSE stream and LangGraph's custom stream show it
as it comes); the call's result is the joined output (text chunks concatenated, anything else listed).
The call's timeout stops the stream (the executor cancels the call; an async generator is closed), and
so does `ToolDef.max_output_chars`: a stream past it is closed and the call fails saying so.
"""

from __future__ import annotations

import contextvars
import inspect
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ToolExecutionError
from echo_tools.events import ToolEvent, call_fields
from echo_tools.runtime import run_in_worker

if TYPE_CHECKING:
    from echo_tools.events import EventBus
    from echo_tools.models import ToolContext, ToolDef

DELTA = "tool.output.delta"
_DONE = object()


def is_streaming(fn: Callable[..., Any]) -> bool:
    """True when calling `fn` gives a generator or an async generator (a streaming tool)."""
    return inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn)


def _size(chunk: Any) -> int:
    if isinstance(chunk, str):
        return len(chunk)
    return len(json.dumps(chunk, default=str))


def _next(iterator: Any) -> Any:
    return next(iterator, _DONE)


async def stream_output(
    events: EventBus, tool: ToolDef, stream: Any, context: ToolContext, *, on_loop: bool = True
) -> Any:
    """Drain `stream` (a generator, or an async generator), emitting each chunk; returns the joined output.

    A sync generator is advanced on a worker thread, one chunk at a time.

    Raises:
        ToolExecutionError: the chunks so far are longer than `tool.max_output_chars` (the stream is closed).
    """
    fields = call_fields(tool.tool_id, tool.name, tool.tool_type.value, context)
    caller = contextvars.copy_context()  # sinks read context variables (LangGraph's stream writer)
    chunks: list[Any] = []
    total = 0
    asynchronous = inspect.isasyncgen(stream)
    try:
        while True:
            if asynchronous:
                try:
                    chunk = await stream.__anext__()
                except StopAsyncIteration:
                    break
            else:
                chunk = await run_in_worker(_next, stream)
                if chunk is _DONE:
                    break
            total += _size(chunk)
            if total > tool.max_output_chars:
                raise ToolExecutionError(
                    f"Tool {tool.tool_id!r}: its stream passed max_output_chars ({tool.max_output_chars}) at "
                    f"chunk {len(chunks) + 1}; the stream was stopped",
                    tool_id=tool.tool_id,
                    field="output",
                )
            chunks.append(chunk)
            if events.sinks:
                event = ToolEvent(type=DELTA, output=chunk, metadata={"chunk": len(chunks)}, **fields)
                caller.run(events.emit, event, on_loop=on_loop)
    finally:
        await _close(stream, asynchronous)
    if chunks and all(isinstance(c, str) for c in chunks):
        return "".join(chunks)
    return chunks


async def _close(stream: Any, asynchronous: bool) -> None:
    """Stop the generator (a timeout or the bound ended the stream early); a sync one that is running on
    its worker thread cannot be stopped, and ends at its next chunk."""
    if asynchronous:
        await stream.aclose()
        return
    try:
        stream.close()
    except ValueError:  # "generator already executing": abandoned on its worker thread
        pass
