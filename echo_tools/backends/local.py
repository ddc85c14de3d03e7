"""The `local` backend: EchoAI's `{module, class, method}` and `{module, function}` Python tools.

The module is imported here, at the first call, never at registration, and only when it is still inside
the registry's `allowed_modules`. How a callable is called is decided once per tool and cached: keyword
arguments, or the whole validated input as one dict / pydantic-model parameter.

Isolation (`execution_config.isolation`):
  - `thread` (default): a sync callable runs in a worker thread; at a timeout the call returns and the
    result is abandoned. Python threads cannot be killed, so the function keeps running to its end.
  - `process`: the function runs in a fresh subprocess that is killed at the timeout. Use it for work that
    must really stop. Input and output cross the process boundary as JSON.
  - `inline`: a sync callable runs directly in the calling thread (on the event loop for `invoke`). This
    is the fast path for small pure functions; the deadline is checked when the function returns (an
    overrun is reported as a timeout) but cannot cut it short. Async callables are awaited as usual.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import functools
import importlib
import inspect
import queue
import threading
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import InlineCall, ToolBackend, module_allowed
from echo_tools.errors import ToolConfigError, ToolError, ToolExecutionError, ToolInputRejectedError

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.models import ToolContext, ToolDef

# Unannotated single parameters with these names receive the whole input (EchoAI's tools use them).
WHOLE_INPUT_NAMES = frozenset({"data", "input", "input_data", "payload", "params", "args", "kwargs_dict"})
_WORKERS = 32


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """How to call one tool's callable, decided once."""

    tool: ToolDef  # the definition this plan was made for (a re-registered tool gets a new plan)
    fn: Callable[..., Any]
    is_async: bool
    style: str  # "kwargs", "dict" or "model"
    model: Any = None  # the pydantic model class for style "model"
    isolation: str = "thread"

    def arguments(self, args: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.style == "kwargs":
            return (), args
        if self.style == "model":
            return (self.model(**args),), {}
        return (dict(args),), {}  # a copy: the tool may change it, the invoked event still holds args


def import_module_checked(tool: ToolDef, allowed_modules: typing.Sequence[str]) -> Any:
    """Import the module `tool.execution_config` names, after checking it is inside `allowed_modules`.

    Raises:
        ToolConfigError: there is no config, the module is outside `allowed_modules`, or it fails to import.
    """
    config = tool.execution_config
    if not config:
        raise ToolConfigError(
            f"Tool {tool.tool_id!r} has no execution_config (a catalogue entry only), so it cannot run; "
            "give it {module, function} or {module, class, method}",
            tool_id=tool.tool_id,
            field="execution_config",
        )
    module_name = config.get("module")
    if not isinstance(module_name, str) or not module_allowed(module_name, allowed_modules):
        # defence in depth: registration checked this, but a stored file may have been edited since
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: module {module_name!r} is outside the allowed modules "
            f"{list(allowed_modules)!r}",
            tool_id=tool.tool_id,
            field="execution_config.module",
        )
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # boundary: the tool's module may fail to import in any way
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}",
            tool_id=tool.tool_id,
            field="execution_config.module",
        ) from exc


def build_instance(tool: ToolDef, module: Any, allowed_modules: typing.Sequence[str] | None = None) -> Any:
    """`module.<class>()` or `module.<factory>()` from the tool's config; constructor errors named.

    With `allowed_modules`, the class or factory must also be defined inside them (see `check_origin`).
    """
    config = tool.execution_config
    kind = "class" if "class" in config else "factory"
    maker = _attribute(tool, module, config.get(kind), kind)
    if allowed_modules is not None:
        check_origin(tool, maker, kind, allowed_modules)
    try:
        return maker()
    except Exception as exc:  # boundary: the tool class's constructor is foreign code
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: cannot build {module.__name__}.{config.get(kind)}(): "
            f"{type(exc).__name__}: {exc}",
            tool_id=tool.tool_id,
            field=f"execution_config.{kind}",
        ) from exc


def import_target(tool: ToolDef, allowed_modules: typing.Sequence[str]) -> tuple[Any, Callable[..., Any]]:
    """Import the tool's module and return `(owner, callable)`; owner is the instance for a method.

    Raises:
        ToolConfigError: the module is outside `allowed_modules`, or the module, class or function is missing.
    """
    module = import_module_checked(tool, allowed_modules)
    config = tool.execution_config
    if "function" in config:
        fn = _decorated_function(_attribute(tool, module, config["function"], "function"))
        check_origin(tool, fn, "function", allowed_modules)
        return None, fn
    instance = build_instance(tool, module, allowed_modules)
    return instance, _attribute(tool, instance, config.get("method"), "method")


class WorkerPool:
    """Daemon worker threads for sync tools, started on demand up to `max_workers`.

    Not `ThreadPoolExecutor` and not the loop's default executor: a timed-out call leaves its thread
    running (threads cannot be killed), and such an abandoned thread must neither keep the process from
    exiting (ThreadPoolExecutor joins its threads at exit) nor make `asyncio.run` wait at loop shutdown.
    Queue and idle tokens are C-level `SimpleQueue`s: a hand-off costs two thread switches and little else.
    """

    def __init__(self, max_workers: int = _WORKERS, name: str = "echo-tools-worker") -> None:
        self.max_workers = max_workers
        self._name = name
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle: queue.SimpleQueue[None] = queue.SimpleQueue()  # one token per idle worker
        self._lock = threading.Lock()
        self._threads = 0

    def submit(self, job: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """Run `job()` on a worker; the future holds its result or exception."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._dispatch(functools.partial(_run_for_future, future, job))
        return future

    def call(self, job: Callable[[], Any], timeout_s: float) -> Any:
        """Run `job()` on a worker and wait for its result (or exception) in this thread.

        Raises:
            WaitTimedOut: `timeout_s` passed first; a job not yet started never starts, a running one is
                left to finish on its own (threads cannot be killed). The job's own exceptions, a
                `TimeoutError` included, are raised as they are.
        """
        handoff = _Handoff(job)
        self._dispatch(handoff)
        if not handoff.done.acquire(timeout=min(timeout_s, threading.TIMEOUT_MAX)):
            handoff.cancelled = True
            raise WaitTimedOut(f"the job did not finish within {timeout_s:g} s")
        if handoff.error is not None:
            error, handoff.error = handoff.error, None  # no cycle through the traceback
            raise error
        return handoff.result

    def _dispatch(self, item: Callable[[], None]) -> None:
        self._queue.put(item)
        try:
            self._idle.get_nowait()  # an idle worker will take it
        except queue.Empty:
            with self._lock:
                if self._threads < self.max_workers:
                    self._threads += 1
                    name = f"{self._name}-{self._threads}"
                    threading.Thread(target=self._work, name=name, daemon=True).start()

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            item()
            del item  # do not keep the last result alive while idle
            self._idle.put(None)


class WaitTimedOut(TimeoutError):
    """`WorkerPool.call` stopped waiting (told apart from a `TimeoutError` the job itself raised)."""


class _Handoff:
    """One `WorkerPool.call`: the worker runs the job, stores its outcome and releases the waiting caller."""

    __slots__ = ("cancelled", "done", "error", "job", "result")

    def __init__(self, job: Callable[[], Any]) -> None:
        self.job: Callable[[], Any] | None = job
        self.result: Any = None
        self.error: BaseException | None = None
        self.cancelled = False
        self.done = threading.Lock()
        self.done.acquire()

    def __call__(self) -> None:
        job, self.job = self.job, None
        if self.cancelled or job is None:  # the caller gave up before the job started
            return
        try:
            self.result = job()
        except BaseException as exc:  # boundary: the job's outcome, whatever it is, goes to its caller
            self.error = exc
        finally:
            self.done.release()


def _run_for_future(future: concurrent.futures.Future[Any], job: Callable[[], Any]) -> None:
    if future.set_running_or_notify_cancel():
        try:
            future.set_result(job())
        except BaseException as exc:  # boundary: the job's outcome, whatever it is, goes to its caller
            future.set_exception(exc)


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def worker_pool() -> WorkerPool:
    """The process-wide pool that sync tools of every backend run in."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = WorkerPool()
    return _pool


async def run_in_worker(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` on a worker thread, with the caller's context variables.

    If the awaiting task is cancelled (a timeout), the call keeps running to its end on its thread and
    its result is dropped: Python threads cannot be killed. Use `isolation: "process"` for work that must stop.
    """
    ctx = contextvars.copy_context()
    return await asyncio.wrap_future(worker_pool().submit(functools.partial(ctx.run, fn, *args, **kwargs)))


def _decorated_function(target: Any) -> Any:
    # CrewAI's `@tool` replaces the function by a (not callable) tool object keeping it as `.func`
    # (`tool_from_crewai` registers such tools as `{module, function}`); the origin check then applies
    # to that function itself.
    inner = getattr(target, "func", None)
    if not callable(target) and inspect.isfunction(inner):
        return inner
    return target


def check_origin(tool: ToolDef, target: Any, kind: str, allowed_modules: typing.Sequence[str]) -> None:
    """Refuse a class, factory or function that an allowed module merely imported from elsewhere.

    The module allow-list is about code: `{module: "AgentTools.x", function: "run"}` must not reach a
    `subprocess.run` or `shutil.rmtree` that `AgentTools.x` happens to import.
    """
    origin = getattr(target, "__module__", None)
    if not isinstance(origin, str) or not module_allowed(origin, allowed_modules):
        name = getattr(target, "__qualname__", None) or type(target).__name__
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: execution_config.{kind} names {origin}.{name}, which is defined outside "
            f"the allowed modules {list(allowed_modules)!r}; only code defined inside them can be a tool",
            tool_id=tool.tool_id,
            field=f"execution_config.{kind}",
        )


def _attribute(tool: ToolDef, owner: Any, name: Any, kind: str) -> Any:
    if not isinstance(name, str) or name.startswith("_") or not hasattr(owner, name):
        where = getattr(owner, "__name__", type(owner).__name__)
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: execution_config.{kind} {name!r} does not exist in {where!r}",
            tool_id=tool.tool_id,
            field=f"execution_config.{kind}",
        )
    return getattr(owner, name)


def plan_call(tool: ToolDef, fn: Callable[..., Any]) -> CallPlan:
    """Decide how `fn` takes the validated input: keyword args, or one dict / pydantic-model parameter."""
    isolation = str(tool.execution_config.get("isolation", "thread"))
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
    style, model = "kwargs", None
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature take keywords or fail loudly
        return CallPlan(tool, fn, is_async, style, None, isolation)
    params = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    variadic = any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in signature.parameters.values())
    properties = tool.input_schema.get("properties") or {}
    if len(params) == 1 and not variadic and params[0].name not in properties:
        param = params[0]
        annotation = _resolved_annotation(fn, param)
        if _is_model(annotation):
            style, model = "model", annotation
        elif _is_mapping(annotation) or (
            annotation is inspect.Parameter.empty and param.name in WHOLE_INPUT_NAMES
        ):
            style = "dict"
    return CallPlan(tool, fn, is_async, style, model, isolation)


def _resolved_annotation(fn: Callable[..., Any], param: inspect.Parameter) -> Any:
    annotation = param.annotation
    if isinstance(annotation, str):  # `from __future__ import annotations` in the tool's module
        try:
            annotation = typing.get_type_hints(fn).get(param.name, annotation)
        except Exception:  # boundary: unresolvable forward references fall back to keyword args
            return inspect.Parameter.empty
    return annotation


def _is_model(annotation: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_mapping(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, (dict, Mapping))


class LocalBackend(ToolBackend):
    """Runs Python tools in this process (worker thread, inline or awaited) or in a killable subprocess."""

    def __init__(self, executor: ToolExecutor) -> None:
        self.executor = executor
        self._plans: dict[str, CallPlan] = {}
        self._lock = threading.Lock()

    def plan(self, tool: ToolDef) -> CallPlan:
        """The cached call plan of `tool` (imports the module on first use)."""
        plan = self._plans.get(tool.tool_id)
        if plan is not None and plan.tool is tool:
            return plan
        with self._lock:
            plan = self._plans.get(tool.tool_id)
            if plan is None or plan.tool is not tool:
                if tool.execution_config.get("isolation") == "process":
                    from echo_tools.backends._isolated import check_function

                    plan = check_function(tool, self.executor.registry.allowed_modules)
                else:
                    _, fn = import_target(tool, self.executor.registry.allowed_modules)
                    plan = plan_call(tool, fn)
                self._plans[tool.tool_id] = plan
        return plan

    def inline(self, tool: ToolDef) -> InlineCall | Callable[[dict[str, Any]], Any] | None:
        """How to run `tool` in the calling thread, when it opted in to `inline`.

        A keyword-argument function is offered as itself (`InlineCall`); others as `call(args)`.
        """
        if tool.execution_config.get("isolation") != "inline":
            return None
        plan = self.plan(tool)
        if plan.is_async:
            return None
        fn, style, model = plan.fn, plan.style, plan.model
        if style == "kwargs":
            return InlineCall(fn, functools.partial(_translate, tool, fn=fn))

        def call(args: dict[str, Any]) -> Any:
            try:
                if style == "kwargs":
                    return fn(**args)
                return fn(model(**args) if style == "model" else dict(args))
            except ToolError:
                raise
            except Exception as exc:  # boundary: the tool's own code
                raise _translate(tool, exc, fn) from exc

        return call

    def blocking(self, tool: ToolDef) -> Callable[[dict[str, Any], float], Any] | None:
        """For sync callers: `call(args, timeout_s)` running a `thread` tool on a worker and waiting for it.

        At the timeout it raises `TimeoutError` and leaves the thread to finish on its own, as the async
        path does. None for tools that are async, inline or process-isolated.
        """
        if tool.execution_config.get("isolation", "thread") != "thread":
            return None
        plan = self.plan(tool)
        if plan.is_async:
            return None
        fn = plan.fn

        def call(args: dict[str, Any], timeout_s: float) -> Any:
            try:
                positional, keywords = plan.arguments(args)
            except Exception as exc:  # boundary: building the tool's own model from the input
                raise _translate(tool, exc, fn) from exc
            job = functools.partial(contextvars.copy_context().run, fn, *positional, **keywords)
            try:
                result = worker_pool().call(job, timeout_s)
            except WaitTimedOut:  # a TimeoutError: the executor reports the call's timeout
                raise
            except ToolError:
                raise
            except Exception as exc:  # boundary: the tool's own code
                raise _translate(tool, exc, fn) from exc
            if inspect.isawaitable(result):  # a sync wrapper returning a coroutine
                from echo_tools.runtime import run_sync

                result = run_sync(_awaited(result), timeout_s)
            return result

        return call

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        plan = self._plans.get(tool.tool_id)
        if plan is None or plan.tool is not tool:
            # the first call imports the module: off the loop, which may serve other work meanwhile
            plan = await run_in_worker(self.plan, tool)
        if plan.isolation == "process":
            from echo_tools.backends._isolated import run_in_subprocess

            return await run_in_subprocess(tool, plan, args, self.executor.registry.allowed_modules)
        try:
            positional, keywords = plan.arguments(args)
            if plan.is_async:
                return await plan.fn(*positional, **keywords)
            if plan.isolation == "inline":
                result = plan.fn(*positional, **keywords)
            else:
                result = await run_in_worker(plan.fn, *positional, **keywords)
            if inspect.isawaitable(result):  # a sync wrapper returning a coroutine
                result = await result
            return result
        except ToolError:
            raise
        except Exception as exc:  # boundary: the tool's own code
            raise _translate(tool, exc, plan.fn) from exc

    def forget(self, tool_id: str | None = None) -> None:
        with self._lock:
            if tool_id is None:
                self._plans.clear()
            else:
                self._plans.pop(tool_id, None)

    async def aclose(self) -> None:
        self.forget()


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _translate(tool: ToolDef, exc: Exception, fn: Callable[..., Any] | None = None) -> ToolExecutionError:
    if isinstance(exc, TypeError) and not _raised_inside(exc, fn):
        # the call itself failed to bind: the input names arguments the callable does not take
        return ToolExecutionError(
            f"Tool {tool.tool_id!r} was called with arguments it does not accept: {exc}", tool_id=tool.tool_id
        )
    # A tool that raises ValueError or TypeError refused its input: the same call would fail again
    cls = ToolInputRejectedError if isinstance(exc, (ValueError, TypeError)) else ToolExecutionError
    return cls(f"Tool {tool.tool_id!r} raised {type(exc).__name__}: {exc}", tool_id=tool.tool_id)


def _raised_inside(exc: BaseException, fn: Callable[..., Any] | None) -> bool:
    """True when `exc`'s traceback passes through `fn`'s own code (it ran, and failed inside)."""
    code = getattr(getattr(fn, "__func__", fn), "__code__", None)
    if code is None:
        return True  # cannot tell: report it as the tool's own error
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return True
        tb = tb.tb_next
    return False
