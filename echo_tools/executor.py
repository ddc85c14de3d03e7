"""ToolExecutor: the single path every tool call takes, whoever asks (CrewAI, LangGraph, the API, the CLI).

`_call` is the one pipeline and reads top to bottom as DESIGN.md's nine steps: resolve, permissions,
normalise, validate, emit `tool.invoked`, run the backend under the deadline (retried as `retry` decides),
normalise and validate the output, emit exactly one of `tool.completed` / `tool.failed` / `tool.timeout`,
return the `ToolResult`. Tool failures are results; only misuse of the API raises. A deterministic, pure
tool with `cache_ttl_s` may be answered after step 5 from `result_cache` (`echo_tools.result_cache`).
Every call gets an id that all its events carry (`call_id`); a backend that `nests` gets it in the
context it runs with, so the calls it makes name it as their `parent_call_id`.

`invoke` runs the pipeline on the caller's event loop; `invoke_sync` runs the same coroutine in the
calling thread with waits that block (`on_loop=False`), so it never suspends and needs no loop. Only
how step 6 waits differs between the two (`_attempt`): a tool whose backend offers it as a plain sync
function (`ToolBackend.sync_call`) runs inline or on a worker thread (`runtime`) that a sync caller waits
on directly; every other tool runs through `backend.call`, on the background loop for sync callers.
What is decided once per tool lives in `routes`, the error table in `outcomes`, retries in `retry`,
the calling thread's own runs (the sync pipeline, inline tools) in `inline`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from echo_tools import gate, retry
from echo_tools.backends.base import BackendOutput
from echo_tools.backends.catalog import backend_class
from echo_tools.egress import EgressPolicy
from echo_tools.errors import ToolDisabledError, ToolError, ToolNotFoundError, ToolOutputValidationError
from echo_tools.events import EventBus, EventSink, ToolEvent, call_fields, format_call_id, next_call_number
from echo_tools.governance.hooks import ToolCall
from echo_tools.governance.stage import OFF_LOOP, Governance
from echo_tools.inline import drive, run_inline
from echo_tools.jsonvalue import to_json_value
from echo_tools.limits import ConcurrencyLimits
from echo_tools.mcp.bound import bound_tool
from echo_tools.metrics import MetricsRecorder
from echo_tools.models import ToolContext, ToolDef, ToolResult, ToolStatus, ToolType
from echo_tools.outcomes import as_tool_error, cancelled_error, permission_refusal, result_error_type
from echo_tools.result_cache import ResultCache
from echo_tools.routes import UNDECIDED, Route, RouteTable, describe_problems, passes
from echo_tools.runtime import await_in_worker, call_in_worker, run_sync
from echo_tools.suggest import tool_hint

if TYPE_CHECKING:
    import httpx

    from echo_tools.backends.base import ToolBackend
    from echo_tools.governance.approvals import ApprovalPolicy, ApprovalRecord, ApprovalStore
    from echo_tools.governance.quotas import QuotaCounter
    from echo_tools.history.recording import Recording
    from echo_tools.models import Quota
    from echo_tools.registry import ToolRegistry

CLOSE_FLUSH_S = 5.0  # how long closing waits for queued events to reach their sinks

logger = logging.getLogger("echo_tools.executor")

NO_CONTEXT = ToolContext()  # the context of calls made without one (never changed)
_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})  # outputs to_json_value returns unchanged
_perf = time.perf_counter


class ToolExecutor:
    """Runs tools from a `ToolRegistry` with validation, limits, retries, events and metrics.

    Args:
        registry: where tools are resolved.
        event_sinks: callables receiving each `ToolEvent` (more via `add_sink`).
        egress: what `api` tools (and anything using `http_client`) may reach; default denies loopback,
            private and link-local addresses. Tests use `EgressPolicy.local()`.
        output_validation: `"error"` makes an output that fails `output_schema` a failed call;
            `"warn"` logs it and keeps the call successful (`metadata["output_warnings"]`).
        result_cache: where results of deterministic, pure tools with `cache_ttl_s` are kept (default: a
            `ResultCache` of 1,000 entries). A call answered from it has `metadata["cached"] = True`.
        replay: a recorded run (`RunHistory(...).recording(run_id)`) answering each validated call in
            order instead of running the tool (`echo_tools.history.recording`).
        approval_policy: `fn(call) -> True | False | None` deciding per call whether it waits for a
            person's approval (None: the tool's `approval` decides). See docs/governance.md.
        approvals: where approvals are kept (default in memory; `governance_stores(history)` puts them
            beside the run history, so another process can decide them).
        quotas: `Quota`s counting every call of this executor (a tool's own `quotas` count its calls).
        quota_counter: where quota counts live (default in memory; `PgQuotaCounter` shares them).
    """

    def __init__(
        self,
        registry: ToolRegistry,
        event_sinks: Iterable[EventSink] = (),
        egress: EgressPolicy | None = None,
        *,
        output_validation: str = "error",
        result_cache: ResultCache | None = None,
        replay: Recording | None = None,
        approval_policy: ApprovalPolicy | None = None,
        approvals: ApprovalStore | None = None,
        quotas: Iterable[Quota] = (),
        quota_counter: QuotaCounter | None = None,
    ) -> None:
        if output_validation not in ("error", "warn"):
            raise ValueError(f"output_validation must be 'error' or 'warn', got {output_validation!r}")
        self.registry = registry
        self.egress = egress if egress is not None else EgressPolicy()
        self.events = EventBus(event_sinks)
        self.output_validation = output_validation
        self.result_cache = result_cache if result_cache is not None else ResultCache()
        self.replay = replay
        self._metrics = MetricsRecorder()
        self._backends: dict[ToolType, ToolBackend] = {}
        self._routes = RouteTable()
        self._limits = ConcurrencyLimits()
        self._lock = threading.RLock()  # re-entrant: a backend being built may ask for another
        # hooks, approvals and quotas: one stage of this pipeline (`echo_tools.governance`)
        self.governance = Governance(
            approval_policy=approval_policy, approvals=approvals, quotas=quotas, quota_counter=quota_counter
        )

    async def invoke(
        self, ref: str | ToolDef, input_data: dict[str, Any] | None = None, context: ToolContext | None = None
    ) -> ToolResult:
        """Run one call of the tool `ref` names; failures come back as a `ToolResult`, never raised.

        Args:
            ref: tool id, name (any case), slug or LLM-facing name, or a registered `ToolDef`.
            input_data: the arguments, a JSON object.
            context: who calls (ids carried into every event), granted permissions, a timeout override.
        """
        context = context or NO_CONTEXT
        if context.budget is not None:  # counted by the request's budget meter (echo_tools.gate)
            return await gate.metered(self._call(ref, input_data, context, on_loop=True), context)
        return await self._call(ref, input_data, context, on_loop=True)

    def invoke_sync(
        self, ref: str | ToolDef, input_data: dict[str, Any] | None = None, context: ToolContext | None = None
    ) -> ToolResult:
        """`invoke` for synchronous callers: the same pipeline, waiting in this thread.

        A sync local tool declared `isolation: "inline"` runs right here, without any event loop: the
        fast path for small pure functions, whose deadline is checked when they return. A sync `thread`
        tool runs on a worker thread this caller waits for up to the deadline; every other tool on the
        process-wide background loop (`echo_tools.runtime`). Either way the call returns at the timeout
        even when the tool does not stop.

        Raises:
            RuntimeError: called from a thread whose event loop is running (await `invoke` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the caller may block
            context = context or NO_CONTEXT
            call = self._call(ref, input_data, context, on_loop=False)
            return drive(gate.metered(call, context) if context.budget is not None else call)
        raise RuntimeError(
            "ToolExecutor.invoke_sync() cannot run inside a running event loop (it would block it); "
            "use 'await executor.invoke(...)' instead"
        )

    # -- the pipeline --------------------------------------------------------------------------------

    async def _call(self, ref: Any, input_data: Any, context: ToolContext, *, on_loop: bool) -> ToolResult:
        started = _perf()
        # every event of this call carries its id, and the inner calls of a composite tool as their parent's;
        # a caller may name the call itself (`context.call_id`)
        call_id: str | int = context.call_id or next_call_number()  # a number: formatted only when read
        # 1. resolve; refuse disabled tools
        tool = bound_tool(ref, context) or self.registry.resolve(ref)  # a canvas server bound for a run
        if tool is None:
            hint = tool_hint(self.registry, ref)  # "did you mean"
            refusal: ToolError = ToolNotFoundError(f"No tool matches {ref!r}{hint}", field="tool")
            return self._refuse(None, ref, input_data, refusal, context, started, on_loop, call_id)
        if tool.status is ToolStatus.DISABLED:
            refusal = ToolDisabledError(f"Tool {tool.tool_id!r} is disabled", tool_id=tool.tool_id)
            return self._refuse(tool, ref, input_data, refusal, context, started, on_loop, call_id)
        # 2. permissions: what the tool needs must be within what the caller granted (None: unrestricted)
        granted = context.granted_permissions
        if tool.permissions and granted is not None:
            ungranted = permission_refusal(tool, granted)
            if ungranted is not None:
                return self._refuse(tool, ref, input_data, ungranted, context, started, on_loop, call_id)
        if context.budget is not None:  # the request's budget: calls, depth, fan-out, time, output
            spent = gate.admit(tool, context)
            if spent is not None:
                return self._refuse(tool, ref, input_data, spent, context, started, on_loop, call_id)
        # 3. normalise (drop None for optional non-nullable keys, fill defaults) and 4. validate
        route = self._routes.route(tool)
        args = route.checked_input(input_data)
        if isinstance(args, ToolError):
            return self._refuse(tool, ref, input_data, args, context, started, on_loop, call_id)
        if self.replay is not None:  # 5-9 answered from a recorded run: no tool runs
            return self.replay.answer(self, tool, args, _ids(context), call_id, on_loop)
        governed = None  # hooks, approval, quotas (`echo_tools.governance`): may deny, change, hold, answer
        plan = self.governance.plan(tool)  # what applies to this tool, worked out once per tool version
        if plan is not None:
            governed = ToolCall(tool, args, context, call_id)  # replaced or edited args: validated again
            verdict = plan.before(governed, route.checked_input, on_loop)
            if verdict is not args:  # denied, held, answered, replaced, or waiting for a database
                if verdict is OFF_LOOP:  # a database answers (approvals, quota counts): wait off the loop
                    verdict = await self.governance.before_off_loop(governed, route.checked_input)
                if isinstance(verdict, ToolError):
                    return self._refuse(tool, ref, args, verdict, context, started, on_loop, call_id)
                if isinstance(
                    verdict, ToolResult
                ):  # the approved call ran before: its result, not a second run
                    return verdict
                args = cast("dict[str, Any]", verdict)
        # 5. announce the call
        fields = None
        if self.events.sinks:
            fields = call_fields(tool.tool_id, tool.name, route.kind, _ids(context), call_id)
            event = ToolEvent(type="tool.invoked", input=args, **fields)
            self.events.emit(event, route.flat_keys, on_loop=on_loop)
        cache_key = None
        if route.cache_ttl_s is not None:  # a deterministic, pure tool: the same call gives the same result
            cache_key = self.result_cache.key(tool, args)
            hit = self.result_cache.get(cache_key, tool) if cache_key is not None else None
            if hit is not None:
                kept = BackendOutput(hit.output, {**hit.metadata, "cached": True})
                result = self._finish(route, args, context, started, fields, on_loop, kept, None, 0, call_id)
                return result if plan is None or governed is None else plan.after(governed, result)
        # 6. run the backend under the deadline, attempt after attempt as `retry` decides
        output, error, attempts = await self._attempts(
            route, args, context, started, fields, on_loop, call_id
        )
        # 7-9. normalise and check the output, close the call, return the result
        result = self._finish(
            route, args, context, started, fields, on_loop, output, error, attempts, call_id
        )
        if cache_key is not None and result.success and route.cache_ttl_s is not None:
            self.result_cache.put(cache_key, tool, result.output, result.metadata, route.cache_ttl_s)
        # the hooks' `after`, and the result kept with the call's approval
        if plan is not None and governed is not None and (plan.afters or governed.approval_id is not None):
            result = plan.after(governed, result)
        return result

    async def _attempts(
        self,
        route: Route,
        args: dict[str, Any],
        context: ToolContext,
        started: float,
        fields: dict[str, Any] | None,
        on_loop: bool,
        call_id: str | int,
    ) -> tuple[Any, ToolError | None, int]:
        """Step 6: the backend under the deadline, attempt after attempt as `retry` decides; the output,
        the last attempt's error (None: it succeeded) and the number of attempts."""
        tool = route.tool
        timeout_ms = context.timeout_ms or tool.timeout_ms
        attempts = 0
        while True:
            attempts += 1
            try:
                output = await self._attempt(route, args, context, timeout_ms / 1000, call_id, on_loop)
                return output, None, attempts
            # the caller gave up (task cancelled, Ctrl-C while waiting): close the call, pass it on
            except (asyncio.CancelledError, KeyboardInterrupt):
                failure = cancelled_error(tool)
                self._finish(route, args, context, started, fields, on_loop, None, failure, attempts, call_id)
                raise
            except Exception as exc:  # boundary: translated into the call's error at this one edge
                error = as_tool_error(exc, tool, timeout_ms)
            if not retry.again(tool, error, attempts):
                return None, error, attempts
            if on_loop:
                await asyncio.sleep(retry.backoff_s(tool, attempts))
            else:
                time.sleep(retry.backoff_s(tool, attempts))

    def _finish(
        self,
        route: Route,
        args: dict[str, Any],
        context: ToolContext,
        started: float,
        fields: dict[str, Any] | None,
        on_loop: bool,
        output: Any,
        error: ToolError | None,
        attempts: int,
        call_id: str | int,
    ) -> ToolResult:
        """Steps 7-9 for the outcome of step 6: its raw output, or the error of its last attempt."""
        tool = route.tool
        metadata: dict[str, Any] = {}
        if error is None:
            # 7. normalise the output to a JSON value and check it against output_schema
            if type(output) is BackendOutput:
                output, metadata = output.output, dict(output.metadata)
            if type(output) not in _JSON_SCALARS:
                output = to_json_value(output)
            check = route.check_output
            if check is not None and not passes(check, output):
                assert route.output_validator is not None
                problems = describe_problems(route.output_validator, output, "output")
                message = (
                    f"Tool {tool.tool_id!r} returned output not matching its output_schema: "
                    + "; ".join(problems)
                )
                if self.output_validation == "error":
                    error, output = (
                        ToolOutputValidationError(message, tool_id=tool.tool_id, field="output"),
                        None,
                    )
                else:
                    logger.warning("%s", message)
                    metadata["output_warnings"] = problems
        duration_ms = (_perf() - started) * 1000
        error_type = None if error is None else result_error_type(error)
        # 8. exactly one closing event (a failure also carries the input)
        if self.events.sinks:
            if fields is None:  # a sink added while the call ran
                fields = call_fields(tool.tool_id, tool.name, route.kind, _ids(context), call_id)
            if error is None:
                event = ToolEvent(
                    type="tool.completed", output=output, duration_ms=duration_ms, attempts=attempts,
                    metadata=metadata, cached=metadata.get("cached"), **fields,
                )  # fmt: skip
            else:
                event = ToolEvent(
                    type="tool.timeout" if error_type == "timeout" else "tool.failed", input=args,
                    error=error.message, error_type=error_type, duration_ms=duration_ms, attempts=attempts,
                    metadata=metadata, **fields,
                )  # fmt: skip
            self.events.emit(event, route.flat_keys, on_loop=on_loop)
        self._metrics.record(tool.tool_id, duration_ms, error_type)
        # 9. the result
        if error is None:
            return ToolResult(
                tool_id=tool.tool_id, name=tool.name, output=output, duration_ms=duration_ms,
                attempts=attempts, metadata=metadata,
            )  # fmt: skip
        return ToolResult(
            tool_id=tool.tool_id, name=tool.name, success=False, error=error.message, error_type=error_type,
            error_field=error.field, duration_ms=duration_ms, attempts=attempts, metadata=metadata,
        )  # fmt: skip

    def _refuse(
        self,
        tool: ToolDef | None,
        ref: Any,
        input_data: Any,
        error: ToolError,
        context: ToolContext,
        started: float,
        on_loop: bool,
        call_id: str | int,
    ) -> ToolResult:
        """A call stopped before it ran (steps 1-4): one `tool.failed` event and no `tool.invoked`."""
        tool_id = tool.tool_id if tool is not None else str(ref)
        name = tool.name if tool is not None else str(ref)
        duration_ms = (_perf() - started) * 1000
        if self.events.sinks:
            kind = tool.tool_type.value if tool is not None else None
            fields = call_fields(tool_id, name, kind, _ids(context), call_id)
            event = ToolEvent(
                type="tool.failed", input=input_data, error=error.message, error_type=error.error_type,
                duration_ms=duration_ms, attempts=0, **fields,
            )  # fmt: skip
            self.events.emit(event, on_loop=on_loop)
        if tool is not None:
            self._metrics.record(tool.tool_id, duration_ms, error.error_type)
        return ToolResult(
            tool_id=tool_id, name=name, success=False, error=error.message, error_type=error.error_type,
            error_field=error.field, duration_ms=duration_ms, attempts=0,
            metadata=dict(getattr(error, "details", None) or {}),  # approval_id, retry_after_s
        )  # fmt: skip

    async def _attempt(
        self, route: Route, args: dict[str, Any], context: ToolContext, timeout_s: float, call_id: str | int,
        on_loop: bool,
    ) -> Any:  # fmt: skip
        """Step 6, one attempt under the deadline. Only how it waits differs between callers: `invoke`
        awaits on its loop; `invoke_sync` (`on_loop` False) blocks its thread, so it never suspends."""
        tool = route.tool
        sync = route.sync
        if sync is UNDECIDED:  # the first call: may import the tool's module, so never on a loop
            backend = self.backend_for(tool.tool_type)
            if on_loop:
                sync = await asyncio.wrap_future(route.decide_sync_elsewhere(backend))
            else:
                sync = route.decide_sync(backend)
        if sync is not None:  # a plain sync function: inline, or on a worker thread waited for directly
            if sync.inline:
                return run_inline(sync.fn, args, timeout_s)
            if on_loop:
                return await await_in_worker(sync.fn, timeout_s, args)
            return call_in_worker(sync.fn, timeout_s, args)
        if not on_loop:  # the backend's async call, on the background loop
            return run_sync(self._attempt(route, args, context, timeout_s, call_id, True))
        backend = self.backend_for(tool.tool_type)
        async with asyncio.timeout(timeout_s):
            if backend.nests and context.call_id is None:  # its inner calls name this one as parent
                assert isinstance(call_id, int)
                context = context.model_copy(update={"call_id": format_call_id(call_id)})
            limit = self._limits.get(tool)
            if limit is None:
                return await backend.call(tool, args, context)
            async with limit:  # waiting for a slot counts against the deadline too
                return await backend.call(tool, args, context)

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

    def add_hook(self, hook: Any) -> None:
        """Run `hook` in every later call: its `before(call)` once the input is validated, its
        `after(call, result)` once the output is checked (`echo_tools.governance.hooks`)."""
        self.governance.add_hook(hook)

    def remove_hook(self, hook: Any) -> None:
        self.governance.remove_hook(hook)

    def decide(
        self,
        approval_id: str,
        decision: str,
        *,
        args: dict[str, Any] | None = None,
        comment: str | None = None,
        by: str | None = None,
        principal: str | None = None,
        admin: bool = True,
    ) -> tuple[ApprovalRecord, ToolResult | None]:
        """Decide a pending approval: `"approve"`, `"reject"` or `"edit"` (with new `args`, validated).

        An approved call made outside a graph runs now, exactly once, and its result is returned with the
        decided record; an approval of a paused graph run is only decided (resume the run to carry on).

        `principal` (a name) who decides; unless `admin`, only an approval of that principal's own calls
        (another's is 404, as if unknown).

        Raises:
            ApprovalDecisionError: unknown approval (404), already decided (409), a bad decision or edit
                arguments that do not validate (422, naming the field; the approval stays pending).
            RuntimeError: called inside a running event loop (call it from a worker thread there).
        """

        def validate(tool_id: str) -> Any:
            tool = self.registry.resolve(tool_id)
            if tool is None:
                return lambda _args: ToolNotFoundError(f"No tool matches {tool_id!r}", field="tool")
            route = self._routes.route(tool)
            return route.checked_input

        def run(record: ApprovalRecord) -> ToolResult:
            return self.invoke_sync(record.tool_id, record.args, ToolContext.model_validate(record.context))

        return self.governance.decide(
            approval_id, decision, args=args, validate=validate, run=run, by=by, comment=comment,
            principal=principal, admin=admin,
        )  # fmt: skip

    def add_sink(self, sink: EventSink, *, inline: bool | None = None) -> None:
        """Deliver every later event of this executor to `sink` too (`inline`: see `EventBus.add`)."""
        self.events.add(sink, inline=inline)

    def remove_sink(self, sink: EventSink) -> None:
        self.events.remove(sink)

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Per tool id: `calls`, `failures`, `timeouts`, `p50_ms`, `p95_ms`, `p99_ms`, `max_ms`."""
        return self._metrics.snapshot()

    def forget(self, tool_id: str | None = None) -> None:
        """Drop cached instances, routes and results (of one tool, or all), e.g. after editing a tool's module."""
        with self._lock:
            self._routes.forget(tool_id)
            backends = list(self._backends.values())
        self.result_cache.forget(tool_id)
        for backend in backends:
            backend.forget(tool_id)

    async def aclose(self) -> None:
        """Close every backend (pooled MCP sessions, HTTP clients, worker threads), then wait (a few seconds
        at most) until the events already emitted have reached their sinks."""
        with self._lock:
            backends = list(self._backends.values())
            self._backends.clear()
            self._routes.forget()
        for backend in backends:
            try:
                await backend.aclose()
            except Exception:  # boundary: one backend failing to close must not keep the others open
                logger.exception("closing backend %r failed", backend)
        # off the loop: the delivery thread may be inside a slow sink
        await asyncio.to_thread(self.events.flush, CLOSE_FLUSH_S)

    def close(self) -> None:
        """`aclose` for synchronous callers (runs on the background loop).

        Raises:
            RuntimeError: called from a thread whose event loop is running (await `aclose` there).
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: the caller may block
            run_sync(self.aclose())
            return
        raise RuntimeError(
            "ToolExecutor.close() cannot run inside a running event loop; use 'await executor.aclose()'"
        )


# -- helpers of the pipeline --------------------------------------------------------------------------


def _ids(context: ToolContext) -> ToolContext | None:
    """The context whose ids events carry; None for a call made without one (its events need none)."""
    return None if context is NO_CONTEXT else context
