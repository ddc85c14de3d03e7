"""One request's exchange with a server, beyond the SDK's send: what it carries in `_meta`, and the
2026-07-28 multi-round trip (`InputRequiredResult`: the server's requests answered by the call's hooks,
the request sent again with the answers and the server's `requestState`).

A call resumed after a graph pause starts from the server's stored request (`callbacks.pending_input`)
instead of sending the request afresh. The rounds are bounded by the config's `input_rounds` (default 10)
and, as a whole, by the call's deadline; a round that says only "not done yet" waits as the 2.x SDK's own
driver does (50 ms, doubling to 250 ms).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.compat import mcp as compat
from echo_tools.errors import ToolExecutionError
from echo_tools.mcp.callbacks import pending_input
from echo_tools.mcp.tasks import TaskHandle

if TYPE_CHECKING:
    from pydantic import ValidationError

    from echo_tools.mcp.callbacks import CallHooks, SessionCallbacks

__all__ = [
    "DEFAULT_INPUT_ROUNDS",
    "as_json",
    "exchange",
    "first_problem",
    "listen_for_tool_changes",
    "relist",
    "with_meta",
]

logger = logging.getLogger("echo_tools.mcp")

DEFAULT_INPUT_ROUNDS = 10  # InputRequiredResult rounds of one request before it fails (as the 2.x SDK)
_STATE_ONLY_WAIT_S = (0.05, 0.25)  # a round with only requestState: wait, doubling to the cap (as the SDK)


def with_meta(message: Any, key: Any, meta: Mapping[str, Any] | None, logs: bool) -> None:
    """Put into the request's `_meta`: `meta` (the run's trace context), and under 2.x our key tying the HTTP
    exchange to the call (`compat.CALL_META`) and, when the call listens (`logs`), the log-level opt-in
    that 2026-07-28 servers need before they send log messages."""
    extra = dict(meta or {})
    if compat.GENERATION >= 2:
        extra[compat.CALL_META] = key
        if logs:
            extra[compat.LOG_LEVEL_META] = "debug"
    params = getattr(message, "params", None)
    if not extra or params is None:
        return
    current = params.meta
    if compat.GENERATION >= 2:
        params.meta = {**(current or {}), **extra}
        return
    from mcp.types import RequestParams

    held = current.model_dump(exclude_none=True) if current is not None else {}
    params.meta = RequestParams.Meta(**{**held, **extra})


async def exchange(
    server: str,
    config: Mapping[str, Any],
    callbacks: SessionCallbacks,
    message: Any,
    send: Callable[[], Awaitable[Any]],
    hooks: CallHooks | None,
    follow: Callable[[Any], Awaitable[Any]] | None = None,
) -> Any:
    """The request's result: `send()` once, then, while the server answers `InputRequiredResult`, its
    requests answered with the call's `hooks` and the request sent again (at most `input_rounds` times);
    a task handle (the Tasks extension) is followed to its end by `follow`.

    Raises:
        ToolExecutionError: the server kept asking past `input_rounds`, or a request was refused.
    """
    pending = pending_input(hooks) if compat.GENERATION >= 2 else None
    result = pending[0] if pending is not None else await send()
    known = pending[1] if pending is not None else None  # what was answered before the pause
    limit = int(config.get("input_rounds") or DEFAULT_INPUT_ROUNDS)
    params = message.params
    what = f"{message.method} {getattr(params, 'name', None) or getattr(params, 'uri', '')!s}".strip()
    wait = _STATE_ONLY_WAIT_S[0]
    rounds = 0
    while compat.input_required(result):
        rounds += 1
        if rounds > limit:
            raise ToolExecutionError(
                f"MCP server {server!r} answered {what} with InputRequiredResult {limit} times without a "
                f"result; stopped (mcpServers.{server}.input_rounds is {limit}); nothing of it was kept"
            )
        responses = None
        if result.input_requests:
            wait = _STATE_ONLY_WAIT_S[0]
            responses = await callbacks.answer_inputs(hooks, result, known)
            known = None
        else:  # only "not done yet": wait a little, as the SDK's own driver does
            await asyncio.sleep(wait)
            wait = min(wait * 2, _STATE_ONLY_WAIT_S[1])
        params.input_responses = responses
        params.request_state = result.request_state
        result = await send()
    if follow is not None and isinstance(result, TaskHandle):
        return await follow(result)
    return result


def first_problem(error: ValidationError) -> str:
    """The first of a validation error's problems, named by where it is (and how many more there are)."""
    problems = error.errors()
    if not problems:
        return str(error)[:200]
    first = problems[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "the result"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {first.get('msg')}{more}"


def as_json() -> Any:
    """A `TypeAdapter` reading an answer as plain JSON (built once, when first needed)."""
    if not _JSON:
        from pydantic import TypeAdapter

        _JSON.append(TypeAdapter(dict[str, Any]))
    return _JSON[0]


_JSON: list[Any] = []


MAX_RELIST_PAGES = 1000


async def relist(session: Any, timeout_s: float) -> None:
    """List the server's tools on `session` (every page): the 2.x SDK then knows which arguments of a tool
    go as `Mcp-Param-*` headers too (2026-07-28 HTTP), and sends them."""
    from mcp import types

    cursor = None
    for _ in range(MAX_RELIST_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await asyncio.wait_for(session.list_tools(params=params), timeout_s)
        cursor = compat.field(page, "nextCursor")
        if not cursor:
            return


async def listen_for_tool_changes(server: str, session: Any, on_changed: Callable[[str], None]) -> None:
    """2026-07-28: the server's tool-list changes arrive on a `subscriptions/listen` stream, not as bare
    notifications; each one calls `on_changed(server)`, as `tools/list_changed` does over a 2025 revision."""
    from mcp.client.subscriptions import ToolsListChanged, listen

    try:
        async with listen(session, tools_list_changed=True) as changes:
            async for event in changes:
                if isinstance(event, ToolsListChanged):
                    on_changed(server)
    except Exception as exc:  # boundary: a server without subscriptions still serves calls
        logger.debug("MCP server %r: no subscriptions/listen stream: %s", server, exc)
