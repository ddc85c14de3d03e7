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

import inspect
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import (
    BackendHost,
    SyncCall,
    ToolBackend,
    check_python_target,
    config_error,
    forget_entries,
)
from echo_tools.backends.python_targets import (
    CallPlan,
    import_target,
    plan_call,
)
from echo_tools.errors import ToolError, ToolExecutionError, ToolInputRejectedError
from echo_tools.runtime import run_in_worker, run_sync
from echo_tools.streaming import is_streaming, stream_output

_PLAIN = frozenset({str, int, float, bool, type(None), dict, list})  # results that are never awaitable

if TYPE_CHECKING:
    from collections.abc import Sequence

    from echo_tools.egress import EgressPolicy
    from echo_tools.models import ToolContext, ToolDef


class LocalBackend(ToolBackend):
    """Runs Python tools in this process (worker thread, inline or awaited) or in a killable subprocess."""

    @classmethod
    def check_config(
        cls, tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
    ) -> None:
        config = tool.execution_config
        if not config:
            return  # EchoAI's legacy {name, description} form: a catalogue entry that cannot run yet
        check_python_target(tool, allowed_modules, kinds=("class", "function"))
        if "class" in config and "method" not in config:
            raise config_error(
                tool, "execution_config.method", "execution_config.class needs execution_config.method"
            )

    def __init__(self, executor: BackendHost) -> None:
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
                entry = self.executor.registry.in_process(tool)
                if entry is not None:  # an object added in-process (`ToolRegistry.add`): no import
                    plan = CallPlan(tool, entry.fn, entry.is_async, entry.style)
                elif tool.execution_config.get("isolation") == "process":
                    from echo_tools.backends._isolated import check_function

                    plan = check_function(tool, self.executor.registry.allowed_modules)
                else:
                    _, fn = import_target(tool, self.executor.registry.allowed_modules)
                    plan = plan_call(tool, fn)
                self._plans[tool.tool_id] = plan
        return plan

    def sync_call(self, tool: ToolDef) -> SyncCall | None:
        """A sync `thread` or `inline` tool as the plain function it is; None for async or process tools."""
        isolation = tool.execution_config.get("isolation", "thread")
        if isolation not in ("thread", "inline"):
            return None
        plan = self.plan(tool)
        if plan.is_async or is_streaming(plan.fn):  # a stream emits events: it runs through `call`
            return None
        fn, style, model = plan.fn, plan.style, plan.model

        def call(args: dict[str, Any]) -> Any:
            try:
                if style == "kwargs":
                    result = fn(**args)
                else:
                    result = fn(model(**args) if style == "model" else dict(args))
            except ToolError:
                raise
            except Exception as exc:  # boundary: the tool's own code
                raise _translate(tool, exc, fn) from exc
            if type(result) not in _PLAIN and inspect.isawaitable(result):  # a sync wrapper of a coroutine
                result = run_sync(_awaited(result))
            return result

        return SyncCall(call, inline=isolation == "inline")

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
            if is_streaming(plan.fn):  # a generator: each chunk an event, the result the joined chunks
                stream = plan.fn(*positional, **keywords)
                return await stream_output(self.executor.events, tool, stream, context)
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
            forget_entries(self._plans, tool_id)

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
