"""The HTTP API: the `/tools` routes EchoAI's IDE calls, secured, plus live events and metrics.

`make_router(registry, executor, settings)` returns an `APIRouter` (prefix `/tools`) to mount into an existing
gateway; `create_app(...)` builds a whole FastAPI app around it (body limit, CORS, error contract, and the
`/workflows` routes when the workflow bridge is installed). FastAPI is imported here only, never by
`import echo_tools`. Paths and response shapes follow EchoAI's routes; its bugs (a shadowed `/health`,
200 answers for failures, no auth, arbitrary modules over HTTP) are fixed. A tool registered here is
`remote` (`ToolRegistry.register_remote`): it may name only code a manifest declares, reference only the
allowed environment variables, and replace or delete only other `remote` tools.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from fastapi import APIRouter, Body, FastAPI, Query
from fastapi import Path as PathParam
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.requests import Request

from echo_tools._version import __version__
from echo_tools.api.errors import (
    ApiError,
    contract_route_class,
    error_body,
    from_failed_result,
    install_error_handlers,
)
from echo_tools.api.events import SSE_HEADERS, EventBroadcaster, event_stream, prometheus_text
from echo_tools.api.owners import owned_copy, refuse_foreign_run, refuse_unowned, viewer
from echo_tools.api.security import Gatekeeper, install_security
from echo_tools.api.shapes import list_item
from echo_tools.api.state import ApiState
from echo_tools.api.ui import make_ui_router
from echo_tools.backends import module_allowed
from echo_tools.errors import EgressDeniedError
from echo_tools.gate import PUBLIC, READ, Principal
from echo_tools.models import ToolContext, ToolDef, ToolType
from echo_tools.settings import ApiSettings

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.history import RunHistory
    from echo_tools.pg.history import PgRunHistory
    from echo_tools.registry import ToolRegistry

AGENT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$"
_PYTHON_TYPES = ("local", "crewai", "langchain")


def refuse_forbidden(state: ApiState, tool: ToolDef) -> None:
    """403 for a registration the server must never accept over HTTP, before the registry sees it.

    Python-backed tools outside `allowed_modules`, and `api` tools whose URL breaks the registry's or the
    executor's egress policy. The registry enforces the module list as well; this names the refusal.
    """
    config = tool.execution_config
    if tool.tool_type.value in _PYTHON_TYPES:
        module = config.get("module")
        allowed = state.registry.allowed_modules
        if isinstance(module, str) and module and not module_allowed(module, allowed):
            raise ApiError(
                403,
                "permission_denied",
                f"Registering a {tool.tool_type.value} tool that names module {module!r} is forbidden: "
                f"only modules under {list(allowed)!r} may be registered",
                tool_id=tool.tool_id,
                field="execution_config.module",
            )
    if tool.tool_type == ToolType.API and isinstance(config.get("url"), str):
        for policy in (state.registry.egress, state.executor.egress):
            try:
                policy.check_url(config["url"])
            except EgressDeniedError as exc:
                raise ApiError(
                    403, "permission_denied", exc.message, tool_id=tool.tool_id, field="execution_config.url"
                ) from exc


_CONTEXT_IDS = ("run_id", "agent_id", "workflow_id", "node_id", "trace_id")
_MAX_TIMEOUT_MS = 3_600_000
# the query parameters `call_context` reads, for the OpenAPI document (read by hand: FastAPI would validate
# six parameters on every call, present or not)
CONTEXT_PARAMETERS = [
    *(
        {"name": n, "in": "query", "required": False, "schema": {"type": "string", "maxLength": 200},
         "description": "carried into the call's events"}
        for n in _CONTEXT_IDS
    ),
    {"name": "timeout_ms", "in": "query", "required": False,
     "schema": {"type": "integer", "exclusiveMinimum": 0, "maximum": _MAX_TIMEOUT_MS},
     "description": "overrides the tool's timeout"},
]  # fmt: skip


INPUT_BODY = {
    "required": False,
    "content": {"application/json": {"schema": {"type": "object", "description": "the tool's input"}}},
}


async def call_context(request: Request) -> dict[str, Any]:
    """The `ToolContext` fields an HTTP caller may set (query parameters `run_id`, `agent_id`,
    `workflow_id`, `node_id`, `trace_id`, at most 200 characters, and `timeout_ms`)."""
    query = request.query_params
    if not query:
        return {}
    context: dict[str, Any] = {}
    for name in _CONTEXT_IDS:
        value = query.get(name)
        if value is not None:
            if len(value) > 200:
                raise ApiError(
                    422, "validation", f"query.{name} must be at most 200 characters, got {len(value)}",
                    field=f"query.{name}",
                )  # fmt: skip
            context[name] = value
    raw = query.get("timeout_ms")
    if raw is not None:
        timeout = int(raw) if raw.strip().isdigit() else 0
        if not 0 < timeout <= _MAX_TIMEOUT_MS:
            raise ApiError(
                422, "validation", f"query.timeout_ms must be an integer from 1 to {_MAX_TIMEOUT_MS}, got {raw!r:.40}",
                field="query.timeout_ms",
            )  # fmt: skip
        context["timeout_ms"] = timeout
    return context


@dataclass
class CallRequest:
    """What an HTTP caller asks of a call: its input (the JSON body) and its context (`call_context`)."""

    input_data: dict[str, Any]
    context: dict[str, Any]


async def call_request(request: Request) -> CallRequest:
    """The `CallRequest` of an invoke route: the JSON object body (missing or null: an empty input) and
    the query's context, read in one step (no parameter of FastAPI's to validate on every call)."""
    raw = await request.body()
    input_data: Any = None
    if raw.strip():
        try:
            input_data = json.loads(raw)
        except ValueError as exc:  # UnicodeDecodeError is one too
            raise ApiError(
                422, "validation", f"The request body is not valid JSON: {exc}", field="body"
            ) from exc
        except RecursionError as exc:  # nested deeper than the parser's stack: the caller's doing
            raise ApiError(
                422, "validation", "The request body nests too deep to be read as a tool's input; flatten it",
                field="body",
            ) from exc  # fmt: skip
    if input_data is None:
        input_data = {}
    elif not isinstance(input_data, dict):
        raise ApiError(
            422, "validation",
            f"The request body must be a JSON object (the tool's input), got {type(input_data).__name__}",
            field="body",
        )  # fmt: skip
    return CallRequest(input_data, await call_context(request))


def make_router(
    registry: ToolRegistry,
    executor: ToolExecutor,
    settings: ApiSettings | None = None,
    *,
    history: RunHistory | PgRunHistory | None = None,
) -> APIRouter:
    """The `/tools` routes, secured by `settings` (API key, body size), ready to mount into any app.

    The router adds an event sink to `executor` and `registry` that feeds `GET /tools/events`;
    `history` (kept by the caller, usually also an executor sink) answers `GET /tools/events/history`.
    """
    settings = settings or ApiSettings()
    broadcaster = EventBroadcaster(settings.event_queue_size)
    executor.add_sink(broadcaster)
    registry.events.add(broadcaster)
    gate = Gatekeeper(settings)
    state = ApiState(registry, executor, settings, broadcaster, gate, history)
    secured = [gate.requires(READ)]
    router = APIRouter(prefix="/tools", tags=["tools"], route_class=contract_route_class())
    router.state = state  # type: ignore[attr-defined]  # lets create_app and tests reach the shared state

    _add_call_routes(router, state)  # the hot routes first: a request is matched against the routes in order
    _add_listing_routes(router, state, secured)
    _add_status_routes(router, state)
    _add_admin_routes(router, state, secured)
    from echo_tools.api.planning import add_planning_routes  # POST /tools/plan, GET /tools/graph
    from echo_tools.api.thirdparty import add_thirdparty_routes  # OpenAPI import and credentials

    add_thirdparty_routes(router, state, secured)  # before `/{tool_id}`, which would shadow them
    add_planning_routes(router, state, secured)
    _add_tool_routes(router, state, secured)
    return router


def _add_call_routes(router: APIRouter, state: ApiState) -> None:
    """The hot routes (matched first): invoke by id or by name, and register."""
    registry, settings, gate = state.registry, state.settings, state.gate
    # the gate, then the body and query read: one dependency (the key is checked before the body is
    # read, so an unknown key is 401 whatever it sends)
    invoker = gate.requires_then("invoke", call_request)

    context_query = {"parameters": CONTEXT_PARAMETERS, "requestBody": INPUT_BODY}

    @router.post("/invoke/id/{tool_id}", summary="Invoke a tool by its exact id", openapi_extra=context_query)
    async def invoke_by_id(
        tool_id: str = PathParam(..., max_length=128),
        gated: tuple[Principal, CallRequest] = invoker,
    ) -> Response:
        tool = registry.get(tool_id)
        if tool is None:
            raise ApiError(404, "not_found", f"No tool has the id {tool_id!r}", tool_id=tool_id)
        return await _invoke(state, tool, gated[1], gated[0])

    @router.post("/invoke/{name}", summary="Invoke a tool by name or id", openapi_extra=context_query)
    async def invoke_by_name(
        name: str = PathParam(..., max_length=200), gated: tuple[Principal, CallRequest] = invoker
    ) -> Response:
        return await _invoke(state, name, gated[1], gated[0])

    @router.post("/register", summary="Register or update a tool (source 'remote')")
    async def register(
        tool: ToolDef = Body(...), principal: Principal = gate.requires("register")
    ) -> dict[str, Any]:
        refuse_forbidden(state, tool)
        tool = owned_copy(state.registry, tool, principal)
        outcome = await anyio.to_thread.run_sync(
            lambda: registry.register_remote(tool, allowed_env=settings.allowed_env)
        )
        return {
            **outcome,
            "source": "remote",
            "message": f"Tool {outcome['tool_id']!r} {outcome['status']}",
        }


LIST_LIMIT = 1000  # tools a listing answers at most (a page); `Link: <...>; rel="next"` names the next


def _add_listing_routes(router: APIRouter, state: ApiState, secured: list[Any]) -> None:
    """The catalogue's listings: every tool, the tools of one type, a search. Each answers a page of at most
    `LIST_LIMIT` tools by id (`limit`, `after`: the last id of the page before), with `X-Total-Count` and a
    `Link` to the next page, and reads the catalogue on a worker thread (never the event loop: a listing or
    a search is work proportional to the catalogue)."""
    registry = state.registry
    page_query = {
        "limit": Query(LIST_LIMIT, ge=1, le=LIST_LIMIT, description=f"tools a page, 1..{LIST_LIMIT}"),
        "after": Query(None, max_length=200, description="the last tool_id of the page before"),
    }

    @router.get("/list", dependencies=secured, summary="Every tool, a page at a time")
    async def list_tools(
        request: Request, limit: int = page_query["limit"], after: str | None = page_query["after"]
    ) -> Response:
        return await _page(request, registry.list_all, limit, after)

    @router.get("/list/type/{tool_type}", dependencies=secured, summary="The tools of one type")
    async def list_by_type(
        request: Request,
        tool_type: str = PathParam(..., max_length=20),
        limit: int = page_query["limit"],
        after: str | None = page_query["after"],
    ) -> Response:
        return await _page(request, lambda: registry.list_by_type(tool_type), limit, after)

    @router.get("/search", dependencies=secured, summary="Tools matching every word of q")
    async def search(
        request: Request,
        q: str = Query("", max_length=200),
        limit: int = page_query["limit"],
        after: str | None = page_query["after"],
    ) -> Response:
        return await _page(request, lambda: registry.search(q), limit, after)


async def _page(request: Request, read: Any, limit: int, after: str | None) -> Response:
    """One page of the tools `read()` answers (sorted by id), on a worker thread: the JSON list EchoAI
    reads, `X-Total-Count` and, when more follow, `Link: <url>; rel="next"`."""

    def build() -> tuple[bytes, int, str | None]:
        tools = sorted(read(), key=lambda t: t.tool_id)
        start = 0
        if after is not None:
            start = next((i for i, t in enumerate(tools) if t.tool_id > after), len(tools))
        page = tools[start : start + limit]
        more = start + limit < len(tools)
        body = json.dumps([list_item(t) for t in page], ensure_ascii=False).encode("utf-8")
        return body, len(tools), page[-1].tool_id if more and page else None

    body, total, last = await anyio.to_thread.run_sync(build)
    headers = {"X-Total-Count": str(total)}
    if last is not None:
        link = request.url.include_query_params(after=last, limit=limit)
        headers["Link"] = f'<{link}>; rel="next"'
    return Response(body, media_type="application/json", headers=headers)


def _add_status_routes(router: APIRouter, state: ApiState) -> None:
    """Liveness, the live event stream, the event history and the approvals."""
    registry, settings, gate = state.registry, state.settings, state.gate
    broadcaster, history = state.broadcaster, state.history

    # Declared before `/{tool_id}`: EchoAI's `/health` was shadowed by it and answered 404.
    @router.get("/health", dependencies=[gate.requires(PUBLIC)], summary="Liveness (needs no API key)")
    async def health() -> dict[str, Any]:
        runs = state.run_pool.stats() if state.run_pool is not None else None
        return {
            "status": "saturated" if runs and runs["saturated"] else "healthy",
            "service": "echo-tools",
            "version": __version__,
            "tool_count": len(registry),
            **({"workflow_runs": runs} if runs else {}),
        }

    @router.get("/events", summary="Server-Sent Events stream of tool events (the principal's own calls)")
    async def events(
        run_id: str | None = Query(None, max_length=200, description="only the events of this run"),
        max_events: int | None = Query(None, gt=0, le=100_000, description="end the stream after N events"),
        principal: Principal = gate.requires("history"),
    ) -> StreamingResponse:
        if run_id is not None and not principal.grants.admin and state.history is not None:
            await anyio.to_thread.run_sync(
                lambda: refuse_foreign_run(principal, state.history, run_id, field="run_id", doing="follow")
            )
        stream = event_stream(broadcaster, run_id, settings.sse_ping_seconds, max_events, viewer(principal))
        return StreamingResponse(stream, media_type="text/event-stream", headers=SSE_HEADERS)

    from echo_tools.api.history import add_history_route

    add_history_route(router, history, gate)
    from echo_tools.api.approvals import add_approval_routes

    add_approval_routes(router, state)  # /tools/approvals (echo_tools.governance), action "approve"


def _add_admin_routes(router: APIRouter, state: ApiState, secured: list[Any]) -> None:
    """Metrics, discovery, the instance cache, an EchoAI agent's tools, an input check."""
    registry, executor, settings, gate = state.registry, state.executor, state.settings, state.gate
    broadcaster = state.broadcaster

    @router.get("/metrics", dependencies=secured, summary="Executor metrics, Prometheus text format")
    async def metrics() -> PlainTextResponse:
        gauges = {
            "echo_tools_tools_registered": float(len(registry)),
            "echo_tools_event_clients": float(broadcaster.client_count),
            "echo_tools_events_published_total": float(broadcaster.published),
            "echo_tools_events_dropped_total": float(broadcaster.dropped),
        }
        text = prometheus_text(executor.metrics(), gauges)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @router.post(
        "/discover",
        dependencies=[gate.requires("register")],
        summary="Re-read the tool manifests of the discovery folders",
    )
    async def discover() -> dict[str, Any]:
        found = await anyio.to_thread.run_sync(registry.discover_local_tools)
        return {
            "status": "success",
            "discovered_count": len(found),
            "tools": [t.tool_id for t in found],
            "problems": [str(p) for p in registry.problems()],
        }

    @router.post(
        "/cache/clear", dependencies=[gate.requires("register")], summary="Drop cached tool instances"
    )
    async def clear_cache() -> dict[str, Any]:
        executor.forget()
        return {"status": "success", "message": "Tool instance cache cleared"}

    @router.get("/agent/{agent_id}", dependencies=secured, summary="The active tools of an EchoAI agent")
    async def agent_tools(agent_id: str = PathParam(..., pattern=AGENT_ID_PATTERN)) -> dict[str, Any]:
        agent = await anyio.to_thread.run_sync(read_agent, settings.agents_dir, agent_id)
        refs = [r for r in agent.get("tools") or [] if isinstance(r, str)]
        tools = registry.get_tools_for_agent(refs)
        bound = {t.tool_id for t in tools}
        # unknown refs and inactive tools, so the IDE can show why a tool is not bound
        left_out = [r for r in refs if getattr(registry.resolve(r), "tool_id", None) not in bound]
        return {
            "agent_id": agent_id,
            "agent_name": agent.get("name"),
            "tools": [list_item(t) for t in tools],
            "tool_count": len(tools),
            "unresolved": left_out,
        }

    @router.post("/validate/{tool_id}", dependencies=secured, summary="Check input against a tool's schema")
    async def validate(
        tool_id: str = PathParam(..., max_length=200), input_data: dict[str, Any] | None = Body(None)
    ) -> dict[str, Any]:
        tool = registry.require(tool_id)
        try:
            errors = registry.input_errors(tool.tool_id, input_data or {})
        except (ValueError, RecursionError) as exc:  # the validator's own recursion limit: too deep an input
            raise ApiError(
                422, "validation", f"The input nests too deep to be checked: {exc}", tool_id=tool.tool_id,
                field="body",
            ) from exc  # fmt: skip
        if not errors:
            return {"valid": True, "tool_id": tool.tool_id, "message": "Input is valid"}
        return {"valid": False, "tool_id": tool.tool_id, "error": "; ".join(errors), "errors": errors}


def _add_tool_routes(router: APIRouter, state: ApiState, secured: list[Any]) -> None:
    """`/{tool_id}` (GET, DELETE): declared last, since it would shadow every one-segment path."""
    registry, executor, gate = state.registry, state.executor, state.gate

    @router.get("/{tool_id}", dependencies=secured, summary="One tool's full definition")
    async def get_tool(tool_id: str = PathParam(..., max_length=200)) -> Any:
        tool = registry.resolve(tool_id)
        wrong = _wrong_method(router, "GET", tool_id) if tool is None else None
        return wrong or registry.require(tool_id).to_storage_dict()

    @router.delete("/{tool_id}", summary="Delete a tool registered over HTTP")
    async def delete_tool(
        tool_id: str = PathParam(..., max_length=200), principal: Principal = gate.requires("register")
    ) -> Any:
        current = registry.get(tool_id)
        if current is None:
            wrong = _wrong_method(router, "DELETE", tool_id)
            if wrong is not None:
                return wrong
            raise ApiError(404, "not_found", f"No tool has the id {tool_id!r}", tool_id=tool_id)
        refuse_unowned(principal, current.owner, f"Tool {tool_id!r}", field="tool_id", tool_id=tool_id)
        await anyio.to_thread.run_sync(registry.delete_remote, tool_id)
        executor.forget(tool_id)
        return {"status": "deleted", "tool_id": tool_id, "message": f"Tool {tool_id!r} deleted"}


def _wrong_method(router: APIRouter, method: str, segment: str) -> JSONResponse | None:
    """405 under the contract when `/tools/<segment>` is another route's path (`GET /tools/discover` is
    not a tool named 'discover': `/{tool_id}` would otherwise answer 404 "No tool matches")."""
    path = f"{router.prefix}/{segment}"
    allowed = sorted(
        m
        for route in router.routes
        if getattr(route, "path", None) == path
        for m in getattr(route, "methods", None) or ()
    )
    if not allowed:
        return None
    message = f"{method} {path} is not allowed; use {', '.join(allowed)}"
    return JSONResponse(
        error_body("method_not_allowed", message, field="method"),
        status_code=405,
        headers={"Allow": ", ".join(allowed)},
    )


async def _invoke(state: ApiState, ref: str | ToolDef, call: CallRequest, principal: Principal) -> Response:
    run_id = call.context.get("run_id")
    if run_id is not None and not principal.grants.admin and state.history is not None:
        # before the call: nothing of it may reach another principal's run (its history, its quota)
        await anyio.to_thread.run_sync(
            lambda: refuse_foreign_run(
                principal, state.history, run_id, field="query.run_id", doing="add calls to"
            )
        )
    ctx = ToolContext(**call.context, **principal_context(principal))
    result = await state.executor.invoke(ref, call.input_data, ctx)
    if not result.success:
        raise from_failed_result(result)
    # serialised by pydantic in one pass (FastAPI's generic encoder would walk the output again)
    return Response(result.model_dump_json(), media_type="application/json")


def principal_context(principal: Principal) -> dict[str, Any]:
    """The `ToolContext` fields a principal sets on a request's calls: its permission ceiling, a fresh
    budget meter shared by every nested call of the request, its name and the end user it acts for."""
    return {
        "granted_permissions": principal.grants.permissions,  # a tuple (or None), decided at start-up
        "budget": principal.meter(),
        "principal": principal.name,
        "user_id": principal.user_id,
    }


def read_agent(agents_dir: Path | None, agent_id: str) -> dict[str, Any]:
    """EchoAI's `<agents_dir>/<agent_id>.json`; the id is checked, never used as a path of its own."""
    if not re.fullmatch(AGENT_ID_PATTERN, agent_id):
        raise ApiError(422, "validation", f"agent_id {agent_id!r} is not a valid agent id", field="agent_id")
    if agents_dir is None:
        raise ApiError(404, "not_found", f"No agent {agent_id!r}: no agents folder is configured")
    base = Path(agents_dir).resolve()
    path = (base / f"{agent_id}.json").resolve()
    if path.parent != base or not path.is_file():
        raise ApiError(404, "not_found", f"No agent {agent_id!r} in the agents folder", field="agent_id")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ApiError(500, "storage", f"Agent file of {agent_id!r} cannot be read: {exc}") from exc
    if not isinstance(data, dict):
        raise ApiError(500, "storage", f"Agent file of {agent_id!r} is not a JSON object")
    return data


ROUTERS_GROUP = "echo_tools.routers"


def include_plugin_routers(app: FastAPI, state: ApiState) -> None:
    """Routers other installed packages add (entry points of the group `echo_tools.routers`, each a
    function taking the `ApiState` and returning an `APIRouter`): the workflow bridge adds `/workflows`."""
    from importlib.metadata import entry_points

    for entry in sorted(entry_points(group=ROUTERS_GROUP), key=lambda e: e.name):
        app.include_router(entry.load()(state))


def add_docs_routes(app: FastAPI, gate: Gatekeeper) -> None:
    """`/openapi.json` and `/docs`, behind the same guard as the routes they describe (the key when set)."""
    from fastapi.openapi.docs import get_swagger_ui_html

    secured = [gate.requires(READ)]

    @app.get("/openapi.json", dependencies=secured, include_in_schema=False)
    async def openapi() -> JSONResponse:
        return JSONResponse(app.openapi())

    @app.get("/docs", dependencies=secured, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(openapi_url="/openapi.json", title="echo-tools")


def create_app(
    registry: ToolRegistry, executor: ToolExecutor, settings: ApiSettings | None = None, **options: Any
) -> FastAPI:
    """A FastAPI app serving `/tools` (and `/workflows` when the workflow bridge is installed): the
    `make_router` routes, which `options` go to (`history`, answering `GET /tools/events/history`).

    Raises:
        ToolConfigError: the settings are unsafe (non-loopback host without an API key, CORS `*` with
            credentials).
    """
    settings = (settings or ApiSettings()).check()
    router = make_router(registry, executor, settings, **options)
    # the `/tools` routes are the app's own routes (FastAPI's `routes`), first, in the router's order: an
    # included router is matched through a wrapper of its own on every request, about a quarter of what
    # FastAPI spends on an invoke; `make_router` still gives the router to mount into another app
    app = FastAPI(
        title="echo-tools", version=__version__, docs_url=None, redoc_url=None, openapi_url=None,
        routes=list(router.routes),
    )  # fmt: skip
    add_docs_routes(app, router.state.gate)  # type: ignore[attr-defined]
    app.state.echo_tools = router.state  # type: ignore[attr-defined]
    include_plugin_routers(app, router.state)  # type: ignore[attr-defined]
    app.include_router(make_ui_router(router.state, options.get("history")))  # type: ignore[attr-defined]
    install_error_handlers(app)
    install_security(app, settings)
    return app
