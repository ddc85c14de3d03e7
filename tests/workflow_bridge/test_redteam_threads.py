"""Red-team review of issue 34: no request's scope reaches another's. EchoAI's middleware
(`workflow_bridge.echoai._carry_the_user`) sets one per request, for async routes and for the worker threads
of sync ones. A real uvicorn server. (The parallel crew's threads: test_redteam_parallel_crew.py.)"""

from __future__ import annotations

import asyncio

import httpx
from fastapi import FastAPI, Request

from echo_tools.gate import current_scope
from tests.echo_tools import _api_support as support
from workflow_bridge.echoai import _carry_the_user


async def test_the_echoai_user_middleware_keeps_each_request_s_user_to_itself() -> None:
    """Held: `_carry_the_user` (workflow_bridge/echoai.py) sets the scope per request; concurrent requests
    of different users, async and sync routes (anyio's worker threads), and a later request without a
    user never see another request's user."""
    app = FastAPI()

    def user_of(request: Request) -> str | None:
        return request.headers.get("x-user")

    @app.get("/async")
    async def on_loop() -> dict[str, str | None]:
        for _ in range(5):
            await asyncio.sleep(0)
        scope = current_scope()
        return {"user": scope.user_id if scope is not None else None}

    @app.get("/sync")
    def in_worker() -> dict[str, str | None]:
        scope = current_scope()
        return {"user": scope.user_id if scope is not None else None}

    _carry_the_user(app, user_of)
    with support.serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            asks = [(path, f"u{n}") for n in range(12) for path in ("/async", "/sync")]
            answers = await asyncio.gather(*(http.get(p, headers={"x-user": u}) for p, u in asks))
            seen = [(p, a.json()["user"]) for (p, _), a in zip(asks, answers, strict=True)]
            later = [(await http.get(p)).json()["user"] for p in ("/async", "/sync") * 4]
    assert seen == asks
    assert later == [None] * 8
