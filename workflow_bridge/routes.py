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
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Body
from fastapi.responses import StreamingResponse

from echo_tools.api.errors import ApiError, contract_route_class, from_tool_error
from echo_tools.api.events import SSE_HEADERS, format_sse
from echo_tools.api.owners import refuse_foreign_run
from echo_tools.errors import ToolError
from echo_tools.gate import CallScope, Principal, acting_as
from echo_tools.mcp.bound import bound_scope
from echo_tools.shapes import event_dict
from echo_tools.suggest import did_you_mean
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
    pool = RunPool()
    state.run_pool = pool  # `/tools/health` reports it

    @router.post("/compile", summary="Map and compile a canvas or {workflow, agents}")
    async def compile_workflow(
        source: dict[str, Any] = Body(...), principal: Principal = gate.requires("compile")
    ) -> dict[str, Any]:
        runner = _runner()

        def work() -> Any:
            # a compile stores nothing: an MCP server a canvas names by URL binds for this compile only
            with acting_as(principal, stores=False), bound_scope(None, principal.name):
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
        user_input, run_id = _run_options(body)
        source = {k: v for k, v in body.items() if k not in RUN_OPTIONS}
        history = histories.get(required=False)
        if run_id is not None and history is not None:
            # another principal's run id (recorded, or named by its calls) is its owner's: 409 naming it
            await anyio.to_thread.run_sync(refuse_foreign_run, principal, history, run_id, "body.run_id")
            await anyio.to_thread.run_sync(_refuse_taken, history, run_id)
        run_id = run_id or f"run_{uuid.uuid4().hex[:16]}"
        pool.take()  # 503 `busy` when every run slot is taken; the run starts now, whoever reads the stream
        queue, task = _start_run(state, pool, source, user_input, run_id, history, principal)
        stream = _relay(queue, task, run_id)
        return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)

    @router.get("/runs/{run_id}", summary="A recorded run: status and last state")
    async def get_run(run_id: str, principal: Principal = gate.requires("history")) -> dict[str, Any]:
        runner = _runner()
        history = histories.get()
        try:
            answer = await anyio.to_thread.run_sync(_read_run, history, run_id, principal)
        except runner.RunResumeError as exc:
            raise _resume_error(exc) from exc
        return _plain(answer)

    _add_resume_routes(router, state, histories, pool)
    return router


def _add_resume_routes(router: APIRouter, state: ApiState, histories: _Histories, pool: RunPool) -> None:
    """`POST /workflows/runs/{run_id}/resume`, and the same resume for `POST /tools/approvals/{id}`
    deciding a paused recorded run (`state.run_resumer`); both on the runs' own pool."""
    gate = state.gate

    @router.post("/runs/{run_id}/resume", summary="Resume a run paused at a HITL node")
    async def resume_run(
        run_id: str, body: dict[str, Any] = Body(...), principal: Principal = gate.requires("approve")
    ) -> dict[str, Any]:
        runner = _runner()
        decision = _resume_request(body)
        history = histories.get()

        def work() -> dict[str, Any]:
            # the run goes on under its own kept scope (its owner's ceiling and budget), not the decider's
            final = runner.resume_run(
                run_id, decision, storage=history, registry=state.registry, executor=state.executor,
                principal=principal, principals=gate.principal_named,
            )  # fmt: skip
            answer = runner.run_status(run_id, storage=history)
            return {**answer, "state": final}

        try:
            answer = await pool.run(work)  # the run's own pool: a long resume takes no route's thread
        except runner.RunResumeError as exc:
            raise _resume_error(exc) from exc
        except ValueError as exc:  # the stored source no longer compiles against this catalogue
            raise ApiError(422, "validation", f"run {run_id!r} cannot be resumed: {exc}") from exc
        return _plain(answer)

    async def carry_on(run_id: str, decision: Any, principal: Principal) -> dict[str, Any] | None:
        """`POST /tools/approvals/{id}` deciding a paused recorded run carries it on here, as the resume
        route does: `{run_id, status, state}`, `{run_id, error}`, or None when it is no recorded run."""
        runner = _runner()
        history = histories.get(required=False)

        def work() -> dict[str, Any] | None:
            if history is None or history.run(run_id) is None:
                return None  # a graph of the host's own (create_agent, a StateGraph): the host resumes it
            final = runner.resume_run(
                run_id, decision, storage=history, registry=state.registry, executor=state.executor,
                principal=principal, principals=gate.principal_named,
            )  # fmt: skip
            return {**runner.run_status(run_id, storage=history), "state": final}

        try:
            answer = await pool.run(work)
        except runner.RunResumeError as exc:  # the decision stands; the run says why it did not go on
            return {"run_id": run_id, "error": _resume_error(exc).body()}
        except ApiError as exc:  # every run slot busy
            return {"run_id": run_id, "error": exc.body()}
        except ValueError as exc:  # the stored source no longer compiles against this catalogue
            message = f"run {run_id!r} cannot be resumed: {exc}"
            return {"run_id": run_id, "error": ApiError(422, "validation", message).body()}
        return None if answer is None else _plain(answer)

    state.run_resumer = carry_on


RUN_SLOTS_ENV = "ECHO_TOOLS_RUN_SLOTS"
DEFAULT_RUN_SLOTS = 8


class RunPool:
    """The worker threads of workflow runs and resumes: a bounded pool of their own (`slots`, from
    `ECHO_TOOLS_RUN_SLOTS`, default 8), so runs blocked for minutes in agents and tools (or left running by
    clients that went away) never take the anyio worker threads every other route needs. A slot is held
    until the run's thread ends; a run asked for while every slot is busy is refused (503 `busy`).
    `/tools/health` reports `stats()`.
    """

    def __init__(self, slots: int | None = None) -> None:
        self.slots = slots if slots is not None else _slots_from_env()
        self.busy = 0
        self._lock = threading.Lock()
        self._limiter = anyio.CapacityLimiter(self.slots)

    def take(self) -> None:
        """Hold a slot for one run, or 503 `busy` naming the limit when none is free."""
        with self._lock:
            if self.busy >= self.slots:
                raise ApiError(
                    503,
                    "busy",
                    f"all {self.slots} workflow run slots are busy (runs in progress; {RUN_SLOTS_ENV} sets "
                    "how many): retry when one ends",
                )
            self.busy += 1

    def give(self) -> None:
        with self._lock:
            self.busy -= 1

    async def run(self, work: Any) -> Any:
        """`work()` in a thread of this pool, a slot held (taken here: 503 when none is free) until it ends."""
        self.take()
        return await self.run_taken(work)

    async def run_taken(self, work: Any, *, abandon_on_cancel: bool = False) -> Any:
        """`work()` in a thread of this pool, for a slot already taken: given back when `work` returns
        (a run abandoned by its client keeps it until then), or at once if the thread never started."""
        started = False

        def held() -> Any:
            nonlocal started
            started = True
            try:
                return work()
            finally:
                self.give()

        try:
            return await anyio.to_thread.run_sync(
                held, abandon_on_cancel=abandon_on_cancel, limiter=self._limiter
            )
        finally:
            if not started:
                self.give()

    def stats(self) -> dict[str, Any]:
        """`{"slots", "busy", "saturated"}` (what `/tools/health` reports)."""
        with self._lock:
            return {"slots": self.slots, "busy": self.busy, "saturated": self.busy >= self.slots}


def _slots_from_env() -> int:
    import os

    text = os.environ.get(RUN_SLOTS_ENV, "")
    if not text:
        return DEFAULT_RUN_SLOTS
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 1024:
        raise ValueError(f"{RUN_SLOTS_ENV} must be a whole number from 1 to 1024, got {text!r}")
    return value


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


def _read_run(history: Any, run_id: str, principal: Principal) -> dict[str, Any]:
    """`run_status` of a run the principal owns (its state is the owner's), else 409 `owned`."""
    runner = _runner()
    answer: dict[str, Any] = runner.run_status(run_id, storage=history)
    runner.check_owner(answer["owner"], principal, run_id, "read")
    return answer


def _run_options(body: dict[str, Any]) -> tuple[str | None, str | None]:
    """`user_input` and `run_id` of a run request, or 422 naming the one that is not a (short) string."""
    user_input = body.get("user_input")
    if user_input is not None and not isinstance(user_input, str):
        raise ApiError(
            422, "validation", f"user_input must be a string, got {user_input!r:.60}", field="body.user_input"
        )
    run_id = body.get("run_id")
    if run_id is not None and (not isinstance(run_id, str) or not run_id or len(run_id) > 200):
        raise ApiError(
            422, "validation", f"run_id must be a short string, got {run_id!r:.60}", field="body.run_id"
        )
    return user_input, run_id


def _resume_request(body: dict[str, Any]) -> dict[str, Any]:
    """The decision of a resume request, or 422 naming the unknown or missing field."""
    unknown = sorted(set(body) - set(RESUME_FIELDS))
    if unknown:
        hint = did_you_mean(unknown[0], RESUME_FIELDS)
        raise ApiError(
            422,
            "validation",
            f"unknown field {unknown[0]!r} in a resume request;{hint} it takes {', '.join(RESUME_FIELDS)}",
            field=f"body.{unknown[0]}",
        )
    if "decision" not in body:
        raise ApiError(
            422, "validation", "decision is required: 'approve', 'reject' or 'edit'", field="body.decision"
        )
    return {k: body[k] for k in RESUME_FIELDS if k in body}


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


def under_principal(run_id: str, principal: Principal, *, executor: Any = None) -> Any:
    """While the block runs, run `run_id` is admitted for `principal`: every tool call of it (whatever
    thread its agent runs in, or a host graph's tool node under it) carries the principal's permission
    ceiling, one budget meter for the whole run, its name and end user; an MCP server its canvas names by
    URL without the `mcp` action binds for this run only (`workflow_bridge.run_scope.running`)."""
    from workflow_bridge.run_scope import running

    return running(CallScope.admit(principal, run_id=run_id), executor)


def _start_run(
    state: ApiState,
    pool: RunPool,
    source: dict[str, Any],
    user_input: str | None,
    run_id: str,
    history: Any,
    principal: Principal | None,
) -> tuple[asyncio.Queue[tuple[str, Any]], asyncio.Task[None]]:
    """Start the run (its slot in `pool` already taken) in a worker thread of the pool; its events, then
    its final state or its error, arrive on the queue."""
    runner = _runner()
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    def relay(event: Any) -> None:  # called from the run's threads
        try:
            loop.call_soon_threadsafe(queue.put_nowait, ("event", event_dict(event)))
        except RuntimeError:
            pass  # the server's loop is closed; nobody is listening any more

    def work() -> Any:
        with under_principal(run_id, principal or state.gate.operator, executor=state.executor):
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
            final = await pool.run_taken(work, abandon_on_cancel=True)
            queue.put_nowait(("final", final))
        except Exception as exc:  # boundary: a failed run is reported in the stream, not as a crash
            queue.put_nowait(("error", exc))

    task = asyncio.create_task(job())
    # the client may leave: the run goes on in its thread (holding its slot) and nobody reads its end
    task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
    return queue, task


async def _relay(
    queue: asyncio.Queue[tuple[str, Any]], task: asyncio.Task[None], run_id: str
) -> AsyncIterator[str]:
    """The run's events as Server-Sent Events as they happen, then its final state (or its error)."""
    seen: set[str] = set()
    status = "running"
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
