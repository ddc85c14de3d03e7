"""EchoAI drop-in: the tool layer in EchoAI's DI container, and the `/tools` and `/workflows` routes in its
gateway, in two calls (see docs/echoai.md).

`install(container, storage_dir=...)` registers `tool.registry`, `tool.executor`, `tool.plugin` and
`workflow.compiler` in any container with `register(name, factory)`; `mount(app, storage_dir=...)` adds the
routes to the host's FastAPI app. Both calls with the same `storage_dir` share one registry and one executor,
built on first use, with the shipped tools (`builtin_tools_dir()`) discovered.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from echo_tools.builtin_tools import builtin_tools_dir

logger = logging.getLogger("workflow_bridge.echoai")

PREFIXES = ("/tools", "/workflows")
_layers: dict[Path, ToolLayer] = {}
_layers_lock = threading.Lock()


class ToolLayer:
    """One storage folder's registry, executor, binding plugin and compiler, each built once, on first use.

    Args:
        storage_dir: the tool store (EchoAI's `apps/storage/tools`, or a folder of its own).
        discovery_dirs: manifest folders discovered besides the shipped tools.
        allowed_modules: packages `local` tools may import (the shipped `AgentTools` by default).
        llm: the model of every agent (`WorkflowCompiler(llm=...)`); None: each agent's own, `ECHO_LLM`,
            else the offline rehearsal model.
        checkpointer: a LangGraph checkpointer for the compiled graphs (HITL resume after a restart).
        missing_agents: `"error"` or `"passthrough"` (`WorkflowCompiler`).
        event_sinks: extra sinks of the executor's tool events.
        approval_policy: `fn(call) -> True | False | None`: which calls wait for a person's approval
            (`ToolExecutor(approval_policy=...)`, docs/governance.md); None: each tool's `approval`.
        egress: the `EgressPolicy` of every outbound request (api tools, MCP over HTTP, OpenAPI documents);
            None: the strict default (no loopback, private or link-local addresses).
        user_of: `fn(request) -> user id | None`, EchoAI's logged-in user of an HTTP request: runs started
            by EchoAI's own routes (`/workflows/execute`) carry it as their end user, so per-user
            credentials and quotas apply (`mount` reads it on every request under the host's app).
    """

    def __init__(
        self,
        storage_dir: str | Path,
        *,
        discovery_dirs: Iterable[str | Path] = (),
        allowed_modules: Sequence[str] = ("AgentTools",),
        llm: Any = None,
        checkpointer: Any = None,
        missing_agents: str = "error",
        event_sinks: Iterable[Any] = (),
        approval_policy: Any = None,
        egress: Any = None,
        user_of: Callable[[Any], str | None] | None = None,
    ) -> None:
        self.storage_dir = Path(storage_dir).expanduser().resolve()
        self.approval_policy = approval_policy
        self.egress = egress
        self.user_of = user_of
        self.discovery_dirs = [builtin_tools_dir(), *(Path(d) for d in discovery_dirs)]
        self.allowed_modules = tuple(allowed_modules)
        self.llm = llm
        self.checkpointer = checkpointer
        self.missing_agents = missing_agents
        self.event_sinks = list(event_sinks)
        self._lock = threading.RLock()
        self._built: dict[str, Any] = {}

    def _once(self, name: str, build: Any) -> Any:
        with self._lock:
            if name not in self._built:
                self._built[name] = build()
            return self._built[name]

    @property
    def registry(self) -> Any:
        """The `ToolRegistry`, its discovery folders read (the shipped tools first)."""

        def build() -> Any:
            from echo_tools import ToolRegistry

            registry = ToolRegistry(
                storage_dir=self.storage_dir,
                discovery_dirs=self.discovery_dirs,
                allowed_modules=self.allowed_modules,
                egress=self.egress,
            )
            registry.discover_local_tools()
            for problem in registry.problems():
                logger.warning("tool store: %s", problem)
            return registry

        return self._once("registry", build)

    @property
    def executor(self) -> Any:
        """The `ToolExecutor` every tool call goes through; its approvals are kept beside the run history
        (`governance_stores`), so a run paused for a tool approval is decided from any process."""

        def build() -> Any:
            from echo_tools import ToolExecutor
            from echo_tools.governance import governance_stores

            stores = governance_stores(self.history)
            return ToolExecutor(
                self.registry, event_sinks=self.event_sinks, egress=self.egress,
                approval_policy=self.approval_policy, **stores,
            )  # fmt: skip

        return self._once("executor", build)

    @property
    def plugin(self) -> Any:
        """A `ToolBindingPlugin` for a compiler that keeps its own graph building."""

        def build() -> Any:
            from workflow_bridge.plugin import ToolBindingPlugin

            return ToolBindingPlugin(self.registry, self.executor)

        return self._once("plugin", build)

    @property
    def compiler(self) -> Any:
        """A `WorkflowCompiler`; it also answers EchoAI's `compile_to_langgraph(workflow, agents)`."""

        def build() -> Any:
            from workflow_bridge.compiler import WorkflowCompiler

            compiler = WorkflowCompiler(
                self.registry,
                self.executor,
                llm=self.llm,
                missing_agents=self.missing_agents,
                checkpointer=self.checkpointer,
            )
            compiler.compile_to_langgraph = compiler.compile  # type: ignore[attr-defined]  # EchoAI's name
            return compiler

        return self._once("compiler", build)

    @property
    def history(self) -> Any:
        """The `RunHistory` in the storage folder (`runs.sqlite`), the one the mounted `/workflows/runs`
        routes read: a run recorded here can be resumed there, and the other way round."""

        def build() -> Any:
            from echo_tools.history import RunHistory

            return RunHistory(self.storage_dir)

        return self._once("history", build)

    @property
    def hitl_manager(self) -> Any:
        """EchoAI's `HITLManager` answered from the run history: assign it to
        `apps.workflow.runtime.hitl.HITLManager` and its `/workflows/hitl/*` routes resume paused runs."""

        def build() -> Any:
            from workflow_bridge.echoai_hitl import EchoAIHitl

            return EchoAIHitl(self)

        return self._once("hitl", build)


def layer_for(storage_dir: str | Path, **options: Any) -> ToolLayer:
    """The `ToolLayer` of a storage folder: made on the first call, the same object afterwards (the
    options of the first call hold)."""
    key = Path(storage_dir).expanduser().resolve()
    with _layers_lock:
        layer = _layers.get(key)
        if layer is None:
            layer = _layers[key] = ToolLayer(key, **options)
        return layer


def install(container: Any, *, storage_dir: str | Path, **options: Any) -> ToolLayer:
    """Register the tool layer in a DI container: `tool.registry`, `tool.executor`, `tool.plugin`,
    `workflow.compiler` (each factory returns one shared object, built on the first `resolve`).

    When the container already holds EchoAI's `workflow.executor` (EchoAI's `apps.workflow.container` was
    imported), its `workflow.executor`, `workflow.node_mapper` and `workflow.hitl` are replaced too
    (`workflow_bridge.echoai_host`): runs are recorded in `ToolLayer.history`, so a run paused at a HITL
    node resumes through `/workflows/hitl/*` or the mounted `/workflows/runs/{run_id}/resume`, and a
    reopened canvas saves again.

    Args:
        container: anything with `register(name, factory)` (EchoAI's `echolib.di.container`).
        storage_dir: the tool store.
        **options: `ToolLayer`'s (`discovery_dirs`, `allowed_modules`, `llm`, `checkpointer`,
            `missing_agents`, `event_sinks`, `approval_policy`, `egress`, `user_of`).

    Returns:
        The `ToolLayer`, for code that wants the objects directly.
    """
    layer = layer_for(storage_dir, **options)
    container.register("tool.registry", lambda: layer.registry)
    container.register("tool.executor", lambda: layer.executor)
    container.register("tool.plugin", lambda: layer.plugin)
    container.register("workflow.compiler", lambda: layer.compiler)
    host_executor = _registered(container, "workflow.executor")
    if host_executor is not None:  # EchoAI's workflow services are registered: answer them too
        from workflow_bridge.echoai_host import EchoAINodeMapper, EchoAIWorkflowExecutor

        if not isinstance(host_executor, EchoAIWorkflowExecutor):
            runs = EchoAIWorkflowExecutor(host_executor, layer)
            container.register("workflow.executor", lambda: runs)
        mapper = layer._once("node_mapper", lambda: EchoAINodeMapper(layer.registry))
        container.register("workflow.node_mapper", lambda: mapper)
        container.register("workflow.hitl", lambda: layer.hitl_manager)
    return layer


def _registered(container: Any, name: str) -> Any:
    resolve = getattr(container, "resolve", None)  # a container with `register` only: nothing to answer
    if resolve is None:
        return None
    try:
        return resolve(name)
    except KeyError:  # EchoAI's container raises KeyError for a name nobody registered
        return None


def mount(
    app: Any,
    *,
    storage_dir: str | Path,
    api_key: str | None = None,
    agents_dir: str | Path | None = None,
    settings: Any = None,
    **options: Any,
) -> ToolLayer:
    """Add the `/tools` and `/workflows` routes, and the run viewer at `/ui/`, to the host's FastAPI app.

    With a key (`api_key`, else `ECHO_TOOLS_API_KEY`), every mounted route but `/tools/health` needs it,
    whatever host the app is served on. Without one, the routes answer only requests whose `Host` is a
    loopback name. Unknown paths and wrong methods under `/tools` and `/workflows` answer the error contract
    (404 / 405 with `error_type`, `message`, `tool_id`, `field`); the host's other answers are untouched.

    Args:
        app: the host's FastAPI app (EchoAI's gateway).
        storage_dir: the tool store (the same as `install`'s: the two share one registry).
        api_key: the key clients send as `X-API-Key` or `Authorization: Bearer` (at least 8 characters).
        agents_dir: EchoAI's agent folder, read by `GET /tools/agent/{agent_id}`.
        settings: a ready `ApiSettings` instead of `api_key` / `agents_dir`.
        **options: `ToolLayer`'s, used when this call makes the layer.

    Raises:
        ToolConfigError: the key is shorter than 8 characters.
    """
    from echo_tools.api import include_plugin_routers, make_router
    from echo_tools.api.ui import make_ui_router
    from echo_tools.settings import ApiSettings

    layer = layer_for(storage_dir, **options)
    if settings is None:
        settings = ApiSettings.from_env(
            api_key=api_key, agents_dir=Path(agents_dir) if agents_dir is not None else None
        )
        # decided by the key alone: the host's bind address is unknown here (EchoAI serves on 0.0.0.0)
        settings = settings.with_changes(require_api_key=settings.api_key is not None)
    settings.check()
    if settings.api_key is None:
        logger.warning(
            "echo-tools routes mounted without an API key: they answer only requests to a loopback host "
            "name; pass api_key= (or set ECHO_TOOLS_API_KEY) to serve them to other machines"
        )
    router = make_router(
        layer.registry, layer.executor, settings, history=layer.history
    )  # whose runs are whose
    app.include_router(router)
    include_plugin_routers(app, router.state)  # type: ignore[attr-defined]
    app.include_router(make_ui_router(router.state, layer.history))  # type: ignore[attr-defined]  # /ui/
    _answer_the_contract_under(app, PREFIXES)
    if layer.user_of is not None:
        _carry_the_user(app, layer.user_of)
    return layer


def _carry_the_user(app: Any, user_of: Callable[[Any], str | None]) -> None:
    """Every request of the host's app runs under a scope naming its logged-in user (`user_of(request)`):
    a run EchoAI's own routes start there carries that end user (its credentials, its quotas)."""
    from echo_tools.gate import OPERATOR, CallScope, Principal, acting_as

    @app.middleware("http")
    async def end_user(request: Any, call_next: Any) -> Any:
        try:
            user = user_of(request)
        except Exception:  # boundary: the host's hook failing must not fail the host's request
            logger.exception("user_of(request) raised; the request runs without an end user")
            user = None
        if not user:
            return await call_next(request)
        principal = Principal(OPERATOR.name, OPERATOR.grants, user_id=str(user))
        with acting_as(CallScope(principal, principal.user_id)):  # no budget of its own, as before
            return await call_next(request)


def _answer_the_contract_under(app: Any, prefixes: tuple[str, ...]) -> None:
    """Routing's own 404 (no route matched) and 405 (wrong method) under `prefixes` answer the error
    contract; every other HTTP error, and everything outside the prefixes, goes to the host's handler."""
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    from echo_tools.api.errors import error_body

    previous = app.exception_handlers.get(HTTPException)

    async def on_http_error(request: Any, exc: Any) -> Any:
        path = request.url.path
        ours = any(path == p or path.startswith(p + "/") for p in prefixes)
        # a 404 raised by a route (the scope names its endpoint) is the route's own answer: left alone
        routing = exc.status_code == 405 or (exc.status_code == 404 and "endpoint" not in request.scope)
        if ours and routing:
            if exc.status_code == 404:
                body = error_body("not_found", f"No route {request.method} {path}", field="path")
            else:
                allow = (getattr(exc, "headers", None) or {}).get("Allow", "")
                body = error_body(
                    "method_not_allowed",
                    f"{request.method} {path} is not allowed; use {allow}",
                    field="method",
                )
            return JSONResponse(body, status_code=exc.status_code, headers=getattr(exc, "headers", None))
        if previous is None:
            from fastapi.exception_handlers import http_exception_handler

            return await http_exception_handler(request, exc)
        return await previous(request, exc)

    app.add_exception_handler(HTTPException, on_http_error)
