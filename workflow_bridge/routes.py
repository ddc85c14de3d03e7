"""The `/workflows` routes: compile a canvas or workflow JSON, run it with its events streamed (SSE), and
read or resume a recorded run (`/workflows/runs/{run_id}`: a run paused at a HITL node resumes here,
whichever process started it; runs are recorded in the storage folder's `runs.sqlite`).

Both hand the work to a worker thread (`anyio.to_thread`), never the event loop: a run calls agents and
tools for minutes, and EchoAI's gateway stalled every other request while one ran. The workflow bridge
(LangGraph, CrewAI) is imported inside the handlers, so building the app stays cheap.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Body
from fastapi.responses import StreamingResponse

from echo_tools.api.app import principal_context
from echo_tools.api.errors import ApiError, contract_route_class, from_tool_error
from echo_tools.api.events import SSE_HEADERS, format_sse
from echo_tools.errors import ToolError
from echo_tools.gate import Principal, acting_as
from echo_tools.models import ToolContext
from echo_tools.shapes import event_dict
from workflow_bridge.shapes import compile_summary, diagnostic_dict

if TYPE_CHECKING:
    from echo_tools.api import ApiState

RUN_OPTIONS = ("user_input", "run_id")
RESUME_FIELDS = ("decision", "edits", "comment", "content")
_RESUME_ERROR_TYPES = {404: "not_found", 409: "conflict", 422: "validation"}


def _runner() -> Any:
    import workflow_bridge.runner as runner  # type: ignore[import-not-found,unused-ignore]

    return runner


def _failure(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ApiError):
        return exc.body()
    if isinstance(exc, ToolError):
        return from_tool_error(exc).body()
    # a ValueError is the source's fault (WorkflowSourceError, WorkflowCompileError); anything else the run's
    kind = "validation" if isinstance(exc, ValueError) else "execution"
    message = str(exc) if isinstance(exc, ValueError) else f"{type(exc).__name__}: {exc}"
    body: dict[str, Any] = {"error_type": kind, "message": message, "tool_id": None, "field": None}
    diagnostics = getattr(exc, "diagnostics", None)
    if diagnostics:
        body["diagnostics"] = [diagnostic_dict(d) for d in diagnostics]
    return body


def make_workflow_router(state: ApiState) -> APIRouter:
    """`POST /workflows/compile` and `POST /workflows/run`, each declaring its action to the gate."""
    gate = state.gate
    router = APIRouter(prefix="/workflows", tags=["workflows"], route_class=contract_route_class())
    histories = _Histories(state)

    @router.post("/compile", summary="Map and compile a canvas or {workflow, agents}")
    async def compile_workflow(
        source: dict[str, Any] = Body(...), principal: Principal = gate.requires("compile")
    ) -> dict[str, Any]:
        runner = _runner()

        def work() -> Any:
            with acting_as(principal, stores=False):  # a compile stores nothing (no MCP server added)
                return runner.compile_source(source, state.registry, state.executor)

        try:
            graph, mapped = await anyio.to_thread.run_sync(work)
        except ValueError as exc:  # WorkflowSourceError and WorkflowCompileError are ValueErrors
            diagnostics = [diagnostic_dict(d) for d in getattr(exc, "diagnostics", None) or []]
            raise ApiError(
                422,
                "validation",
                f"The workflow cannot be compiled: {exc}",
                extra={"diagnostics": diagnostics},
            ) from exc
        return compile_summary(graph, mapped)

    @router.post("/run", summary="Run a workflow; node and tool events as SSE")
    async def run_workflow(
        body: dict[str, Any] = Body(...), principal: Principal = gate.requires("run")
    ) -> StreamingResponse:
        user_input = body.get("user_input")
        if user_input is not None and not isinstance(user_input, str):
            raise ApiError(
                422,
                "validation",
                f"user_input must be a string, got {user_input!r:.60}",
                field="body.user_input",
            )
        run_id = body.get("run_id")
        if run_id is not None and (not isinstance(run_id, str) or not run_id or len(run_id) > 200):
            raise ApiError(
                422, "validation", f"run_id must be a short string, got {run_id!r:.60}", field="body.run_id"
            )
        source = {k: v for k, v in body.items() if k not in RUN_OPTIONS}
        history = histories.get(required=False)
        if run_id is not None and history is not None:
            await anyio.to_thread.run_sync(_refuse_taken, history, run_id)
        stream = _run_stream(
            state,
            source,
            user_input,
            run_id or f"run_{uuid.uuid4().hex[:16]}",
            history,
            principal,
        )
        return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)

    @router.get("/runs/{run_id}", summary="A recorded run: status and last state")
    async def get_run(run_id: str, principal: Principal = gate.requires("history")) -> dict[str, Any]:
        runner = _runner()
        history = histories.get()

        def work() -> dict[str, Any]:
            answer: dict[str, Any] = runner.run_status(run_id, storage=history)
            runner.check_owner(answer["owner"], principal, run_id, "read")  # its state is the owner's
            return answer

        try:
            answer = await anyio.to_thread.run_sync(work)
        except runner.RunResumeError as exc:
            raise _resume_error(exc) from exc
        return _plain(answer)

    @router.post("/runs/{run_id}/resume", summary="Resume a run paused at a HITL node")
    async def resume_run(
        run_id: str, body: dict[str, Any] = Body(...), principal: Principal = gate.requires("approve")
    ) -> dict[str, Any]:
        runner = _runner()
        unknown = sorted(set(body) - set(RESUME_FIELDS))
        if unknown:
            raise ApiError(
                422,
                "validation",
                f"unknown field {unknown[0]!r} in a resume request; it takes {', '.join(RESUME_FIELDS)}",
                field=f"body.{unknown[0]}",
            )
        if "decision" not in body:
            raise ApiError(
                422,
                "validation",
                "decision is required: 'approve', 'reject' or 'edit'",
                field="body.decision",
            )
        decision = {k: body[k] for k in RESUME_FIELDS if k in body}
        history = histories.get()

        def work() -> dict[str, Any]:
            with under_principal(run_id, principal):
                final = runner.resume_run(
                    run_id, decision, storage=history, registry=state.registry, executor=state.executor
                )
            answer = runner.run_status(run_id, storage=history)
            return {**answer, "state": final}

        try:
            answer = await anyio.to_thread.run_sync(work)
        except runner.RunResumeError as exc:
            raise _resume_error(exc) from exc
        except ValueError as exc:  # the stored source no longer compiles against this catalogue
            raise ApiError(422, "validation", f"run {run_id!r} cannot be resumed: {exc}") from exc
        return _plain(answer)

    return router


class _Histories:
    """The server's run history, or (an app built without one) the run history of the catalogue's storage
    folder, opened on first use (one per router)."""

    def __init__(self, state: ApiState) -> None:
        self.state = state
        self._history: Any = None
        self._lock = threading.Lock()

    def get(self, *, required: bool = True) -> Any:
        kept = getattr(self.state, "history", None)
        if kept is not None:  # the server's own (PostgreSQL's, shared by every replica, or runs.sqlite)
            return kept
        with self._lock:
            if self._history is None:
                storage = self.state.registry.storage
                folder = storage.directory if storage is not None else None
                if folder is None:
                    if not required:
                        return None
                    raise ApiError(
                        503,
                        "storage",
                        "this server keeps no run history: its catalogue has no storage folder",
                    )
                from echo_tools.history import RunHistory

                self._history = RunHistory(folder)
            return self._history


def _refuse_taken(history: Any, run_id: str) -> None:
    """409 before the stream starts when `run_id` is already recorded: a run is never replaced (the runner
    refuses it too, in one step, for two requests racing for one new id)."""
    if history.run(run_id) is not None:
        raise ApiError(
            409,
            "conflict",
            f"run_id {run_id!r} is already recorded in the run history (a run is never replaced): choose "
            "another run id, or leave it out to get a new one",
            field="body.run_id",
        )


def _resume_error(exc: Any) -> ApiError:
    field = "body." + exc.field if exc.field in RESUME_FIELDS else exc.field
    kind = "owned" if exc.field == "owner" else _RESUME_ERROR_TYPES.get(exc.status, "validation")
    return ApiError(exc.status, kind, str(exc), field=field)


def _plain(answer: dict[str, Any]) -> dict[str, Any]:
    # graph state holds LangChain messages and LangGraph interrupts: JSON as the SSE frames write it
    state = dict(answer.get("state") or {})
    if "__interrupt__" in state:
        state["__interrupt__"] = [getattr(i, "value", i) for i in state["__interrupt__"]]
    return {**answer, "state": json.loads(json.dumps(state, default=str))}


def under_principal(run_id: str, principal: Principal) -> Any:
    """While the block runs, every tool call of run `run_id` (whatever thread its agent runs in) carries
    the principal's permission ceiling, one budget meter for the whole run, its name and end user."""
    from workflow_bridge.run_scope import SubRun, filed

    fields = principal_context(principal)
    return _both(
        filed(run_id, SubRun(inner=ToolContext(**fields), deadline=fields["budget"].deadline)),
        acting_as(principal),
    )


@contextmanager
def _both(first: Any, second: Any) -> Iterator[None]:
    with first, second:
        yield


async def _run_stream(
    state: ApiState,
    source: dict[str, Any],
    user_input: str | None,
    run_id: str,
    history: Any = None,
    principal: Principal | None = None,
) -> AsyncIterator[str]:
    """Start the run in a worker thread and relay its events as they happen, then the final state."""
    runner = _runner()
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def relay(event: Any) -> None:  # called from the run's threads
        try:
            loop.call_soon_threadsafe(queue.put_nowait, ("event", event_dict(event)))
        except RuntimeError:
            pass  # the server's loop is closed; nobody is listening any more

    def work() -> Any:
        with under_principal(run_id, principal or state.gate.operator):
            return runner.run_workflow(
                source,
                registry=state.registry,
                executor=state.executor,
                user_input=user_input,
                on_event=relay,
                run_id=run_id,
                history=history,
            )

    async def job() -> None:
        try:
            final = await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
            queue.put_nowait(("final", final))
        except Exception as exc:  # boundary: a failed run is reported in the stream, not as a crash
            queue.put_nowait(("error", exc))

    task = asyncio.create_task(job())
    seen: set[str] = set()
    status = "running"
    try:
        yield format_sse("run.started", {"run_id": run_id})
        while True:
            kind, item = await queue.get()
            if kind == "event":
                if item.get("type") == "run.finished":
                    status = str(item.get("status") or status)
                event_id = item.get("event_id")
                if event_id:
                    if event_id in seen:  # never relay one event twice
                        continue
                    seen.add(event_id)
                yield format_sse(str(item.get("type", "event")), item, event_id)
            elif kind == "final":
                state_ = _plain({"state": item})["state"]
                yield format_sse("run.completed", {"run_id": run_id, "status": status, "state": state_})
                return
            else:
                stopped = status if status in ("failed", "cancelled") else "failed"
                yield format_sse("run.failed", {"run_id": run_id, "status": stopped, **_failure(item)})
                return
    finally:
        if not task.done():
            # the client left: the worker thread cannot be interrupted and finishes on its own
            task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
