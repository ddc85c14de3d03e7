"""ToolExecutor: the single path every tool call takes, whoever asks (CrewAI, LangGraph, the API, the CLI).

`invoke` reads top to bottom as DESIGN.md's nine steps: resolve, permissions, normalise, validate, emit
`tool.invoked`, run the backend under the timeout (with retries for pure/idempotent tools), normalise and
validate the output, emit exactly one of `tool.completed` / `tool.failed` / `tool.timeout`, return the
`ToolResult`. Tool failures are results; only misuse of the API raises. The executor never knows tool
types: `backend_for(tool_type)` builds the backend of each type (`backends.catalog`) on first use. What
is decided once per tool lives in `routes`, how a run ends in `outcomes`, `max_concurrency` in `limits`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from echo_tools import retry
from echo_tools.backends.base import BackendOutput
from echo_tools.backends.catalog import backend_class
from echo_tools.egress import EgressPolicy
from echo_tools.errors import (
    ToolDisabledError,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolOutputValidationError,
    ToolPermissionError,
    ToolValidationError,
)
from echo_tools.events import EventSink
from echo_tools.limits import ConcurrencyLimits
from echo_tools.metrics import (
    NO_CONTEXT,
    CallEventBus,
    MetricsRecorder,
    call_fields,
    make_event,
    make_result,
    new_event,
    to_json_value,
)
from echo_tools.models import ToolContext, ToolDef, ToolResult, ToolStatus, ToolType
from echo_tools.outcomes import NOT_RUN, Outcome, cancelled, result_error_type, timeout_error
from echo_tools.routes import UNDECIDED, Route, RouteTable, describe_problems, passes
from echo_tools.runtime import run_sync
from echo_tools.schema import normalize_args

if TYPE_CHECKING:
    import httpx

    from echo_tools.backends.base import ToolBackend
    from echo_tools.registry import ToolRegistry

logger = logging.getLogger("echo_tools.executor")

# bound once: module globals are the cheapest look-ups on the hot path
_NO_CONTEXT = NO_CONTEXT
_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})  # outputs to_json_value returns unchanged
_perf = time.perf_counter
_running_loop = asyncio._get_running_loop
_is_none = functools.partial(operator.is_, None)


class ToolExecutor:
    """Runs tools from a `ToolRegistry` with validation, limits, retries, events and metrics.

    Args:
        registry: where tools are resolved.
        event_sinks: callables receiving each `ToolEvent` (more via `add_sink`).
        egress: what `api` tools (and anything using `http_client`) may reach; default denies loopback,
            private and link-local addresses. Tests use `EgressPolicy.local()`.
        output_validation: `"error"` makes an output that fails `output_schema` a failed call;
            `"warn"` logs it and keeps the call successful (`metadata["output_warnings"]`).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        event_sinks: Iterable[EventSink] = (),
        egress: EgressPolicy | None = None,
        *,
        output_validation: str = "error",
    ) -> None:
        if output_validation not in ("error", "warn"):
            raise ValueError(f"output_validation must be 'error' or 'warn', got {output_validation!r}")
        self.registry = registry
        self.egress = egress if egress is not None else EgressPolicy()
        self.events: CallEventBus = CallEventBus(event_sinks)
        self.output_validation = output_validation
        self._metrics = MetricsRecorder()
        self._backends: dict[ToolType, ToolBackend] = {}
        self._routes = RouteTable()
        self._by_ref = self._routes.by_ref  # step 1's first look-up, one attribute away
        self._limits = ConcurrencyLimits()
        self._lock = threading.RLock()  # re-entrant: a backend being built may ask for another

    # -- the pipeline --------------------------------------------------------------------------------

    async def invoke(
        self, ref: str | ToolDef, input_data: dict[str, Any] | None = None, context: ToolContext | None = None
    ) -> ToolResult:
        """Run one call of the tool `ref` names; failures come back as a `ToolResult`, never raised.

        Args:
            ref: tool id, name (any case), slug or LLM-facing name, or a registered `ToolDef`.
            input_data: the arguments, a JSON object.
            context: who calls (ids carried into every event), granted permissions, a timeout override.
        """
        context = context or _NO_CONTEXT
        started = _perf()
        admitted = self._admit(ref, input_data, context, started)  # steps 1-5
        if not isinstance(admitted, tuple):  # a refusal (cheaper than isinstance on a pydantic class)
            return admitted
        route, args, fields = admitted
        output = self._run_inline(route, args, context)  # step 6, in place for opted-in sync tools
        if output is NOT_RUN:
            outcome = None
        elif type(output) is Outcome:
            outcome = output
        else:
            return self._finish(route, args, context, started, fields, output)  # steps 7-9
        if outcome is None or self._again(route, outcome):
            first = outcome.attempts + 1 if outcome else 1
            try:
                outcome = await self._run(route.tool, args, context, first)
            except asyncio.CancelledError:
                self._close(route, args, context, started, fields, cancelled(route.tool, first))
                raise
        return self._close(route, args, context, started, fields, outcome)

    def invoke_sync(
        self, ref: str | ToolDef, input_data: dict[str, Any] | None = None, context: ToolContext | None = None
    ) -> ToolResult:
        """`invoke` for synchronous callers.

        A sync local tool declared `isolation: "inline"` runs right here, in this thread, without any event
        loop: the fast path for small pure functions, whose deadline is checked when they return. Every
        other tool runs on the process-wide background loop (`echo_tools.runtime`), a sync one on a worker
        thread, so the deadline holds: the call returns at the timeout even when the tool does not stop.

        Raises:
            RuntimeError: called from a thread whose event loop is running (await `invoke` there).
        """
        if _running_loop() is not None:
            raise RuntimeError(
                "ToolExecutor.invoke_sync() cannot run inside a running event loop (it would block it); "
                "use 'await executor.invoke(...)' instead"
            )
        context = context or _NO_CONTEXT
        started = _perf()
        admitted = self._admit(ref, input_data, context, started)
        if not isinstance(admitted, tuple):  # a refusal (cheaper than isinstance on a pydantic class)
            return admitted
        route, args, fields = admitted
        output = self._run_inline(route, args, context)
        if output is NOT_RUN:
            outcome = self._run_blocking(route, args, context)
        elif type(output) is Outcome:
            outcome = output
        else:
            return self._finish(route, args, context, started, fields, output)
        if outcome is None or self._again(route, outcome):
            first = outcome.attempts + 1 if outcome else 1
            try:
                outcome = run_sync(self._run(route.tool, args, context, first))
            except BaseException:  # KeyboardInterrupt while waiting: the call is stopped, say so, re-raise
                self._close(route, args, context, started, fields, cancelled(route.tool, first))
                raise
        return self._close(route, args, context, started, fields, outcome)

    def _admit(
        self, ref: Any, input_data: Any, context: ToolContext, started: float
    ) -> tuple[Route, dict[str, Any], dict[str, Any] | None] | ToolResult:
        """Steps 1-5: the route, the normalised input and the call's event fields (None without sinks)."""
        # 1. resolve; refuse disabled tools. A text ref resolved before maps to its route directly, for as
        # long as the registry still holds that very definition under its id: names are unique across
        # every form a ref may take, so a ref cannot move to another tool while its own stays registered.
        route = self._by_ref.get(ref) if type(ref) is str else None
        if route is not None and self.registry._view[0].get(route.tool.tool_id) is route.tool:
            tool = route.tool
        else:
            found = self.registry.resolve(ref)
            if found is None:
                error: ToolError = ToolNotFoundError(f"No tool matches {ref!r}", field="tool")
                return self._refuse(None, ref, input_data, error, context, started)
            tool, route = found, None
        if tool.status is ToolStatus.DISABLED:
            error = ToolDisabledError(f"Tool {tool.tool_id!r} is disabled", tool_id=tool.tool_id)
            return self._refuse(tool, ref, input_data, error, context, started)
        # 2. permissions: what the tool needs must be within what the caller granted (None: unrestricted)
        granted = context.granted_permissions
        if tool.permissions and granted is not None:
            missing = [p.value for p in tool.permissions if p not in granted]
            if missing:
                error = ToolPermissionError(
                    f"Tool {tool.tool_id!r} needs permissions {missing!r} that the caller did not grant "
                    f"(granted: {[p.value for p in granted]!r})",
                    tool_id=tool.tool_id,
                    field="permissions",
                )
                return self._refuse(tool, ref, input_data, error, context, started)
        # 3. normalise: drop None for optional non-nullable keys, fill defaults
        if input_data is None:
            input_data = {}
        elif not isinstance(input_data, dict):
            error = ToolValidationError(
                f"Tool {tool.tool_id!r}: input must be a JSON object, got {input_data!r:.200}",
                tool_id=tool.tool_id,
                field="input",
            )
            return self._refuse(tool, ref, input_data, error, context, started)
        if route is None:
            route = self._routes.route(tool, ref)
        if route.fills_defaults:
            args = normalize_args(tool.input_schema, input_data)
            if args is input_data:
                args = dict(input_data)
        else:
            args = dict(input_data)  # nothing to fill; still our own copy
        # 4. validate; the message names the path and the bad value
        check = route.check_input
        try:
            valid = check is None or check(args)
        except ValueError:  # jsonschema-rs refuses values JSON cannot hold (bytes, sets, datetimes)
            valid = False
        if not valid and check is not None and not route.fills_defaults and any(map(_is_none, args.values())):
            # step 3's other half, needed only now: a None that normalising drops (optional key, schema
            # without null) always fails the schema, so an input that passed has none to drop
            args = normalize_args(tool.input_schema, args)
            valid = passes(check, args)
        if not valid:
            problems = describe_problems(route.input_validator, args, "input")
            error = ToolValidationError(
                f"Tool {tool.tool_id!r}: invalid input: {'; '.join(problems)}",
                tool_id=tool.tool_id,
                field=problems[0].split(":", 1)[0] if problems else "input",
            )
            return self._refuse(tool, ref, args, error, context, started)
        # 5. announce the call; the fields both events share are read once
        if not self.events.sinks:
            return route, args, None
        fields = call_fields(tool.tool_id, tool.name, route.kind, context)
        values = fields.copy()
        values["type"] = "tool.invoked"
        values["input"] = args
        values["metadata"] = {}
        self.events.emit(new_event(values), route.flat_keys)
        return route, args, fields

    def _run_inline(self, route: Route, args: dict[str, Any], context: ToolContext) -> Any:
        """One attempt in the calling thread for tools that opted in.

        Returns the raw output (no wrapper: this is the fast path), an `Outcome` holding the error, or
        `NOT_RUN` when the tool has no inline path.
        """
        call = route.inline
        if call is UNDECIDED:
            call = route.decide_inline(self.backend_for)
        if call is None:
            return NOT_RUN
        timeout_ms = context.timeout_ms or route.tool.timeout_ms
        direct = route.inline_fn
        started = _perf()
        try:
            output = direct.fn(**args) if direct is not None else call(args)
        except ToolError as exc:
            return Outcome(error=exc)
        except Exception as exc:  # boundary: the tool's own code (its backend says what it means), or a bug
            if direct is None:
                return Outcome(error=ToolExecutionError(f"Tool {route.tool.tool_id!r} failed: {exc!r}"))
            error = direct.translate(exc)
            error.__cause__ = exc
            return Outcome(error=error)
        if (_perf() - started) * 1000 > timeout_ms:
            # inline work cannot be cut short; an overrun is still reported as the timeout it is
            return Outcome(error=timeout_error(route.tool, timeout_ms))
        return output

    def _run_blocking(self, route: Route, args: dict[str, Any], context: ToolContext) -> Outcome | None:
        """One attempt on a worker thread that this (sync) caller waits for up to the deadline.

        The sync callers' path for tools that run on worker threads anyway: two thread switches instead of
        four through the background loop. None when the backend offers no such path for the tool.
        """
        call = route.blocking
        if call is UNDECIDED:
            call = route.decide_blocking(self.backend_for)
        if call is None:
            return None
        timeout_ms = context.timeout_ms or route.tool.timeout_ms
        try:
            output = call(args, timeout_ms / 1000)
        except TimeoutError:  # the wait ran out; the abandoned thread finishes on its own
            return Outcome(error=timeout_error(route.tool, timeout_ms))
        except ToolError as exc:
            return Outcome(error=exc)
        except Exception as exc:  # boundary: a backend bug must still end as a failed result
            return Outcome(error=ToolExecutionError(f"Tool {route.tool.tool_id!r} failed: {exc!r}"))
        return Outcome(output=output)

    @staticmethod
    def _again(route: Route, outcome: Outcome) -> bool:
        error = outcome.error
        return (
            error is not None
            and outcome.attempts < retry.max_attempts(route.tool)
            and retry.is_retryable(error)
        )

    async def _run(
        self, tool: ToolDef, args: dict[str, Any], context: ToolContext, first_attempt: int = 1
    ) -> Outcome:
        # 6. the backend under the timeout (each attempt), retried only for pure/idempotent tools
        timeout_ms = context.timeout_ms or tool.timeout_ms
        attempts = retry.max_attempts(tool)
        attempt = first_attempt
        if attempt > 1:  # the inline attempt failed: wait as any retry does
            await asyncio.sleep(retry.backoff_s(tool, attempt - 1))
        while True:
            try:
                backend = self.backend_for(tool.tool_type)
                limit = self._limits.get(tool)
                async with asyncio.timeout(timeout_ms / 1000):
                    if limit is None:
                        raw = await backend.call(tool, args, context)
                    else:
                        async with limit:  # waiting for a slot counts against the deadline too
                            raw = await backend.call(tool, args, context)
                if isinstance(raw, BackendOutput):
                    return Outcome(output=raw.output, metadata=dict(raw.metadata), attempts=attempt)
                return Outcome(output=raw, attempts=attempt)
            except TimeoutError:
                error: ToolError = timeout_error(tool, timeout_ms)
            except ToolError as exc:
                error = exc
            except Exception as exc:  # boundary: a backend bug must still end as a failed result
                error = ToolExecutionError(f"Tool {tool.tool_id!r} failed: {exc!r}", tool_id=tool.tool_id)
            if attempt >= attempts or not retry.is_retryable(error):
                return Outcome(error=error, attempts=attempt)
            await asyncio.sleep(retry.backoff_s(tool, attempt))
            attempt += 1

    def _close(
        self,
        route: Route,
        args: dict[str, Any],
        context: ToolContext,
        started: float,
        fields: dict[str, Any] | None,
        outcome: Outcome,
    ) -> ToolResult:
        """Steps 7-9 for the `Outcome` of step 6 (the inline fast path hands `_finish` its bare output)."""
        return self._finish(
            route,
            args,
            context,
            started,
            fields,
            outcome.output,
            outcome.error,
            outcome.attempts,
            outcome.metadata,
        )

    def _finish(
        self,
        route: Route,
        args: dict[str, Any],
        context: ToolContext,
        started: float,
        fields: dict[str, Any] | None,
        output: Any,
        error: ToolError | None = None,
        attempts: int = 1,
        metadata: dict[str, Any] | None = None,
    ) -> ToolResult:
        """Steps 7-9 for the outcome of step 6: its raw output, or the error of its last attempt."""
        tool = route.tool
        if metadata is None:
            metadata = {}
        if error is None:
            # 7. normalise the output to a JSON value and check it against output_schema
            if type(output) not in _JSON_SCALARS:
                output = to_json_value(output)
            check = route.check_output
            try:
                valid = check is None or check(output)
            except ValueError:  # a value to_json_value could not turn into JSON
                valid = False
            if not valid:
                assert route.output_validator is not None
                problems = describe_problems(route.output_validator, output, "output")
                message = (
                    f"Tool {tool.tool_id!r} returned output not matching its output_schema: "
                    + "; ".join(problems)
                )
                if self.output_validation == "error":
                    error = ToolOutputValidationError(message, tool_id=tool.tool_id, field="output")
                else:
                    logger.warning("%s", message)
                    metadata = {**metadata, "output_warnings": problems}
        else:
            output = None
        duration_ms = (_perf() - started) * 1000
        # 8. exactly one closing event (a failure also carries the input); 9. the result
        error_type = None if error is None else result_error_type(error)
        if self.events.sinks:
            if fields is None:  # a sink added while the call ran
                fields = call_fields(tool.tool_id, tool.name, route.kind, context)
            values = fields.copy()
            values["output"] = output
            values["duration_ms"] = duration_ms
            values["attempts"] = attempts
            values["metadata"] = metadata
            if error is None:
                values["type"] = "tool.completed"
            else:
                values["type"] = "tool.timeout" if error_type == "timeout" else "tool.failed"
                values["input"] = args
                values["error"] = error.message
                values["error_type"] = error_type
            self.events.emit(new_event(values), route.flat_keys)
        self._metrics.record(tool.tool_id, duration_ms, error_type)
        if error is None:
            return make_result(
                tool.tool_id, tool.name, True, output, None, None, duration_ms, attempts, metadata
            )
        return make_result(
            tool.tool_id, tool.name, False, None, error.message, error_type, duration_ms, attempts, metadata
        )

    def _refuse(
        self,
        tool: ToolDef | None,
        ref: Any,
        input_data: Any,
        error: ToolError,
        context: ToolContext,
        started: float,
    ) -> ToolResult:
        """A call stopped before it ran (steps 1-4): one `tool.failed` event and no `tool.invoked`."""
        tool_id = tool.tool_id if tool is not None else str(ref)
        name = tool.name if tool is not None else str(ref)
        duration_ms = (_perf() - started) * 1000
        if self.events.sinks:
            self.events.emit(
                make_event(
                    "tool.failed",
                    tool_id,
                    name,
                    tool.tool_type.value if tool is not None else None,
                    context,
                    input=input_data,
                    error=error.message,
                    error_type=error.error_type,
                    duration_ms=duration_ms,
                    attempts=0,
                )
            )
        if tool is not None:
            self._metrics.record(tool.tool_id, duration_ms, error.error_type)
        return make_result(tool_id, name, False, None, error.message, error.error_type, duration_ms, 0, {})

    # -- backends and resources ----------------------------------------------------------------------

    def backend_for(self, tool_type: ToolType | str) -> ToolBackend:
        """The backend of `tool_type`, built as `BackendClass(self)` on first use.

        Raises:
            ToolConfigError: the type is unknown or its backend module cannot be loaded.
        """
        kind = ToolType(tool_type)
        backend = self._backends.get(kind)
        if backend is not None:
            return backend
        with self._lock:
            backend = self._backends.get(kind)
            if backend is None:
                backend = self._backends[kind] = backend_class(kind)(self)
        return backend

    def http_client(self) -> httpx.AsyncClient:
        """The executor's shared `httpx.AsyncClient` for the running event loop (one per loop)."""
        from echo_tools.backends.http import HttpBackend

        backend = self.backend_for(ToolType.API)
        assert isinstance(backend, HttpBackend)
        return backend.client()

    def add_sink(self, sink: EventSink) -> None:
        """Deliver every later event of this executor to `sink` too."""
        self.events.add(sink)

    def remove_sink(self, sink: EventSink) -> None:
        self.events.remove(sink)

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Per tool id: `calls`, `failures`, `timeouts`, `p50_ms`, `p95_ms`, `p99_ms`, `max_ms`."""
        return self._metrics.snapshot()

    def forget(self, tool_id: str | None = None) -> None:
        """Drop cached instances and routes (of one tool, or all), e.g. after editing a tool's module."""
        with self._lock:
            self._routes.forget(tool_id)
            backends = list(self._backends.values())
        for backend in backends:
            backend.forget(tool_id)

    async def aclose(self) -> None:
        """Close every backend (pooled MCP sessions, HTTP clients, worker threads)."""
        with self._lock:
            backends = list(self._backends.values())
            self._backends.clear()
            self._routes.forget()
        for backend in backends:
            try:
                await backend.aclose()
            except Exception:  # boundary: one backend failing to close must not keep the others open
                logger.exception("closing backend %r failed", backend)

    def close(self) -> None:
        """`aclose` for synchronous callers (runs on the background loop).

        Raises:
            RuntimeError: called from a thread whose event loop is running (await `aclose` there).
        """
        if asyncio._get_running_loop() is not None:
            raise RuntimeError(
                "ToolExecutor.close() cannot run inside a running event loop; use 'await executor.aclose()'"
            )
        run_sync(self.aclose())
