"""`GET /tools/events/history`: the kept tool events of the principal's own calls (an admin's: every
call's), filtered before the limit, oldest first.

The history is the executor's `RunHistory` (`<storage>/runs.sqlite`) or, with PostgreSQL, the one every
replica writes. A bad `limit` or `since` is a 422 naming the field and the value, in the API's contract.
"""

from __future__ import annotations

from typing import Any

import anyio
from fastapi import APIRouter, Query

from echo_tools.api.errors import ApiError
from echo_tools.api.owners import viewer
from echo_tools.gate import Principal
from echo_tools.history import DEFAULT_LIMIT, check_limit, check_since


def add_history_route(router: APIRouter, history: Any, gate: Any) -> None:
    """Add the history route to `router` (action `history`); without a history it answers 404 saying none
    is kept."""

    @router.get("/events/history", summary="Kept tool events of the principal's calls, oldest first")
    async def events_history(
        run_id: str | None = Query(None, max_length=200, description="only the events of this run"),
        tool_id: str | None = Query(None, max_length=200),
        agent_id: str | None = Query(None, max_length=200),
        since: str | None = Query(None, max_length=100, description="ISO 8601 time, inclusive"),
        limit: str | None = Query(None, max_length=20, description="1..10000, default 100"),
        principal: Principal = gate.requires("history"),
    ) -> dict[str, Any]:
        count = _limit(limit)
        try:
            moment = check_since(since)
        except ValueError as exc:
            raise ApiError(422, "validation", str(exc), field="since") from exc
        if history is None:
            raise ApiError(404, "not_found", "This server keeps no event history")
        events = await anyio.to_thread.run_sync(
            lambda: history.events(
                run_id=run_id,
                tool_id=tool_id,
                agent_id=agent_id,
                since=moment,
                limit=count,
                principal=viewer(principal),
            )
        )
        return {"events": [event.to_dict() for event in events]}


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    try:
        return check_limit(int(text.strip()))
    except ValueError as exc:
        message = (
            str(exc)
            if "limit must" in str(exc)
            else f"limit must be an integer from 1 to 10000, got {text!r}"
        )
        raise ApiError(422, "validation", message, field="limit") from exc
