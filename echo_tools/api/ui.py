"""The run viewer: `/ui/`, a page that shows the recorded runs, one run as a timeline of its calls, live.

`make_ui_router(state, history)` serves the page and its script and style (files of the package,
`echo_tools/ui/`: no CDN, no build step) and the JSON it reads: `GET /ui/api/runs` (a page of runs,
filtered), `GET /ui/api/runs/{run_id}` (one run and its events) and `GET /ui/api/stream` (Server-Sent
Events: the run's tool events as they happen and every change of a run's status). Decisions go to the
existing routes (`POST /workflows/runs/{run_id}/resume`). The data routes pass the gate as every route
does (action `history`; the decisions' routes declare `approve`) and show a principal its own runs only
(an admin's: every run; another's run is 409 `owned` naming its owner); every stream, with a run or not,
takes one of the event streams' slots (`max_clients`);
the page itself holds no data: asked for without the key, it answers 401 with the same empty page, whose
login form keeps the key in the tab's `sessionStorage` and sends it as `X-API-Key`.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator, Callable
from importlib import resources
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from echo_tools.api.errors import ApiError, contract_route_class
from echo_tools.api.events import SSE_HEADERS, EventClient, TooManyClientsError, format_sse
from echo_tools.api.owners import refuse_foreign_run, viewer
from echo_tools.gate import PUBLIC, READ, Principal
from echo_tools.history.browse import PAGE_DEFAULT
from echo_tools.history.queries import RUN_STATUSES, timestamp_now

if TYPE_CHECKING:
    from echo_tools.api.security import Gatekeeper
    from echo_tools.api.state import ApiState

ASSETS = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "favicon.svg": "image/svg+xml",
}
PAGE_HEADERS = {
    # the page's own files only: an injected <script> or inline handler would not run even if one slipped in
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
RUN_ID_MAX = 200
STATUS_POLL_S = 1.0  # how often an open stream looks for changed runs


def asset(name: str) -> bytes:
    """A file of the viewer (`echo_tools/ui/<name>`), as shipped in the package."""
    return (resources.files("echo_tools") / "ui" / name).read_bytes()


def make_ui_router(state: ApiState, history: Any) -> APIRouter:
    """The `/ui` routes (page, files, data, stream) on `history` (None: the data routes answer 404)."""
    router = APIRouter(prefix="/ui", tags=["ui"], route_class=contract_route_class())
    _add_page_routes(router, state.gate)
    _add_run_routes(router, state, history)
    return router


def _add_page_routes(router: APIRouter, gate: Gatekeeper) -> None:
    """The page and its files: public routes (the page answers 401 without the key, and shows a form)."""
    public = [gate.requires(PUBLIC)]
    files = {name: asset(name) for name in ASSETS}

    def allowed(request: Request) -> bool:
        """The gate's answer for the page: False for a missing or wrong key (the page then says 401);
        a keyless server's `Host` check and the body limit hold as on every route."""
        try:
            gate.admit(request, READ)
        except ApiError as exc:
            if exc.status != 401:
                raise
            return False
        return True

    @router.get("", dependencies=public, include_in_schema=False)
    async def to_page() -> RedirectResponse:
        return RedirectResponse("ui/", status_code=307)  # relative: the page's own links are relative

    @router.get(
        "/", dependencies=public, summary="The run viewer (an empty page until its script has the key)"
    )
    async def page(request: Request) -> Response:
        status = 200 if allowed(request) else 401
        return Response(files["index.html"], status, headers=PAGE_HEADERS, media_type=ASSETS["index.html"])

    @router.get("/{name}", dependencies=public, include_in_schema=False)
    async def page_file(request: Request, name: str = PathParam(..., max_length=40)) -> Response:
        if name not in ASSETS or name == "index.html":
            raise ApiError(404, "not_found", f"The run viewer has no file {name!r}", field="path")
        allowed(request)  # code, no data: loaded before the login form can send the key
        return Response(files[name], headers=PAGE_HEADERS, media_type=ASSETS[name])


def _add_run_routes(router: APIRouter, state: ApiState, history: Any) -> None:
    """The data the page reads, behind the `history` action: a page of runs, one run, and the stream."""
    needs = state.gate.requires("history")

    def kept() -> Any:
        """The history (its `browser` is read on a worker thread: the first read makes its indexes)."""
        if history is None:
            # as /tools/events/history answers: a configuration, not a server error (no 5xx for it)
            raise ApiError(
                404, "not_found", "This server keeps no run history: the run viewer has nothing to show"
            )
        return history

    @router.get("/api/runs", summary="A page of the principal's recorded runs, newest first")
    async def runs(
        status: str | None = Query(None, max_length=40, description=" | ".join(RUN_STATUSES)),
        workflow_id: str | None = Query(None, max_length=RUN_ID_MAX),
        agent_id: str | None = Query(None, max_length=RUN_ID_MAX),
        before: str | None = Query(None, max_length=600, description="the `next` cursor of the page before"),
        limit: str | None = Query(None, max_length=10, description="1..200, default 50"),
        principal: Principal = needs,
    ) -> dict[str, Any]:
        if status is not None and status not in RUN_STATUSES:
            raise ApiError(
                422,
                "validation",
                f"status must be one of {', '.join(RUN_STATUSES)}, got {status!r}",
                field="status",
            )
        count = _page_limit(limit)
        queries = kept()
        now = timestamp_now()  # a stream opened with `since=now` misses no change made after this page
        try:
            page = await anyio.to_thread.run_sync(
                lambda: queries.browser.run_page(
                    status=status,
                    workflow_id=workflow_id,
                    agent_id=agent_id,
                    before=before,
                    limit=count,
                    owner=viewer(principal),
                )
            )
        except ValueError as exc:  # a cursor that is not one
            raise ApiError(422, "validation", str(exc), field="before") from exc
        return {**page, "now": now, "statuses": list(RUN_STATUSES)}

    @router.get("/api/runs/{run_id}", summary="One run of the principal and its tool events, oldest first")
    async def run(
        run_id: str = PathParam(..., max_length=RUN_ID_MAX), principal: Principal = needs
    ) -> Response:
        queries = kept()

        def read() -> tuple[dict[str, Any] | None, list[str], bool]:
            refuse_foreign_run(principal, queries, run_id, field="run_id", doing="read")
            record = queries.browser.run_record(run_id)
            bodies, truncated = queries.browser.run_events_json(run_id)
            return record, bodies, truncated

        now = timestamp_now()
        record, bodies, truncated = await anyio.to_thread.run_sync(read)
        if record is None and not bodies:
            raise ApiError(404, "not_found", f"No run {run_id!r} in the run history", field="run_id")
        record = record or {"run_id": run_id, "workflow_id": None, "status": None, "error": None}
        head = json.dumps({"run": record, "truncated": truncated, "now": now}, ensure_ascii=False)
        # the events as stored (redacted when they were recorded), not parsed and written again
        return Response(f'{head[:-1]}, "events": [{", ".join(bodies)}]}}', media_type="application/json")

    _add_stream_route(router, state, kept)


def _add_stream_route(router: APIRouter, state: ApiState, kept: Callable[[], Any]) -> None:
    """`GET /ui/api/stream`: a run's tool events (a run the principal owns) and the status changes of the
    principal's runs; every stream takes one of the event streams' slots."""
    needs = state.gate.requires("history")

    @router.get("/api/stream", summary="SSE: a run's tool events and the principal's runs' status changes")
    async def stream(
        run_id: str | None = Query(None, max_length=RUN_ID_MAX, description="its (and its sub-runs') events"),
        since: str | None = Query(None, max_length=40, description="changes after this `now` of a page"),
        principal: Principal = needs,
    ) -> StreamingResponse:
        queries = kept()
        if run_id is not None:
            await anyio.to_thread.run_sync(
                lambda: refuse_foreign_run(principal, queries, run_id, field="run_id", doing="follow")
            )
        broadcaster = state.broadcaster
        client, release = None, _given_back(broadcaster)
        try:  # a stream with a run reads its calls' events (only the principal's), one without none
            if run_id is not None:
                client = broadcaster.add_client(None, viewer(principal))
            else:
                broadcaster.add_listener()
        except TooManyClientsError as exc:
            raise ApiError(503, "unavailable", str(exc), field="max_clients") from exc
        frames = _frames(state, queries, client, run_id, since or timestamp_now(), viewer(principal), release)
        if client is not None:
            weakref.finalize(frames, broadcaster.remove_client, client)
        else:
            weakref.finalize(frames, release)
        return StreamingResponse(frames, media_type="text/event-stream", headers=SSE_HEADERS)


def _page_limit(text: str | None) -> int:
    if text is None:
        return PAGE_DEFAULT
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if not 1 <= value <= 200:
        raise ApiError(
            422, "validation", f"limit must be an integer from 1 to 200, got {text!r}", field="limit"
        )
    return value


def _given_back(broadcaster: Any) -> Callable[[], None]:
    """Gives a listener's slot back once (when the stream ends, or is dropped without being read)."""
    done = False

    def give() -> None:
        nonlocal done
        if not done:
            done = True
            broadcaster.remove_listener()

    return give


async def _frames(
    state: ApiState,
    queries: Any,
    client: EventClient | None,
    run_id: str | None,
    since: str,
    owner: str | None = None,
    release: Callable[[], None] | None = None,
) -> AsyncIterator[str]:
    """`ready`, then the tool events of `run_id` and its sub-runs (when given) and a `run` frame for each
    recorded run (of `owner`, when given) whose status changed; a comment line keeps a quiet stream open."""
    loop = asyncio.get_running_loop()
    nested = f"{run_id}/"
    ping = state.settings.sse_ping_seconds
    try:
        yield format_sse("ready", {"run_id": run_id, "since": since})
        last_look = last_sent = loop.time()
        while True:
            entries = await client.next_entries(STATUS_POLL_S) if client else await _pause(STATUS_POLL_S)
            chosen = [e.frame for e in entries if e.run_id == run_id or (e.run_id or "").startswith(nested)]
            if client is not None and client.pending_drop:
                chosen.append(
                    format_sse("dropped", {"dropped": client.pending_drop, "reason": "client too slow"})
                )
                client.pending_drop = 0
            if loop.time() - last_look >= STATUS_POLL_S:
                last_look = loop.time()
                changed = await anyio.to_thread.run_sync(_changes, queries, since, owner)
                for record in changed:
                    since = max(since, record["updated"])
                    chosen.append(format_sse("run", record))
            if chosen:
                last_sent = loop.time()
                yield "".join(chosen)
            elif loop.time() - last_sent >= ping:
                last_sent = loop.time()
                yield ": ping\n\n"
    finally:
        if client is not None:
            state.broadcaster.remove_client(client)
        elif release is not None:
            release()


def _changes(history: Any, since: str, owner: str | None) -> list[dict[str, Any]]:
    return history.browser.runs_changed(since, owner)  # type: ignore[no-any-return]


async def _pause(seconds: float) -> list[Any]:
    await asyncio.sleep(seconds)
    return []
