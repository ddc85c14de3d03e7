"""The executor's pipeline as a declared list of stages, each a small object with one job over the `Call`.

    resolve      the tool the reference names (a tool its run bound first); a disabled one refused
    permissions  what the tool needs within the call's ceiling
    budget       the call counted against its scope's budget meter (calls, depth, fan-out, time)
    validate     the input normalised (None dropped, defaults filled) and checked against the schema
    replay       a recorded run answers the call instead of the tool
    governance   the hooks, the approval, the quotas (`echo_tools.governance`)
    cache        a deterministic, pure tool's kept result
    attempts     the backend under the deadline, attempt after attempt as `retry` decides
    finish       the output normalised and checked, the closing event, the result

A stage's `run(call)` returns None (the call goes on to the next), a `ToolResult` (the call ends with it),
or an awaitable of either (it waits: for a database off the event loop, for the backend). `applies(route)`
says whether it has anything to do for a tool version at all: a route runs only the stages that apply to
it (`ToolExecutor.route_of`), so a stage that never applies to a tool costs its calls nothing. A call stopped before
it runs gets one `tool.failed` event (`refuse`); one that ran gets `tool.invoked` and exactly one closing
event. `invoke_sync` runs the same stages with waits that block, so its awaitables never suspend.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol, cast

from echo_tools import retry
from echo_tools.backends.base import BackendOutput
from echo_tools.call import NO_CONTEXT
from echo_tools.errors import ToolDisabledError, ToolError, ToolNotFoundError, ToolOutputValidationError
from echo_tools.events import ToolEvent, call_fields, format_call_id
from echo_tools.gate import admit
from echo_tools.governance.stage import OFF_LOOP
from echo_tools.inline import run_inline
from echo_tools.jsonvalue import to_json_value
from echo_tools.models import ToolResult, ToolStatus
from echo_tools.outcomes import as_tool_error, cancelled_error, permission_refusal, result_error_type
from echo_tools.routes import UNDECIDED, Route, describe_problems, passes
from echo_tools.runtime import await_in_worker, call_in_worker, run_sync
from echo_tools.suggest import tool_hint

if TYPE_CHECKING:
    from echo_tools.backends.base import ToolBackend
    from echo_tools.call import Call
    from echo_tools.events import EventBus
    from echo_tools.governance.stage import Governance as GovernanceStage
    from echo_tools.history.recording import Recording
    from echo_tools.limits import ConcurrencyLimits
    from echo_tools.metrics import MetricsRecorder
    from echo_tools.models import ToolContext, ToolType
    from echo_tools.registry import ToolRegistry
    from echo_tools.result_cache import ResultCache
    from echo_tools.routes import RouteTable

__all__ = ["STAGES", "Resolve", "Stage", "announce", "close", "refuse"]

logger = logging.getLogger("echo_tools.executor")

Outcome = ToolResult | Awaitable[ToolResult | None] | None
_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})  # outputs to_json_value returns unchanged
_perf = time.perf_counter


class ToolExecutor(Protocol):
    """What the stages use of the executor that runs them (`echo_tools.ToolExecutor` is the one)."""

    registry: ToolRegistry
    events: EventBus
    routes: RouteTable
    governance: GovernanceStage
    replay: Recording | None
    result_cache: ResultCache
    metrics_recorder: MetricsRecorder
    concurrency: ConcurrencyLimits
    output_validation: str

    def plan_route(self, route: Route) -> None: ...

    def backend_for(self, tool_type: ToolType | str) -> ToolBackend: ...


class Stage(Protocol):
    """One job of the pipeline: `run(call)` goes on (None), ends the call, or waits."""

    def applies(self, route: Route) -> bool: ...

    def run(self, call: Call) -> Outcome: ...


def ids(context: ToolContext) -> ToolContext | None:
    """The context whose ids events carry; None for a call made without one (its events need none)."""
    return None if context is NO_CONTEXT else context


def refuse(executor: ToolExecutor, call: Call, error: ToolError) -> ToolResult:
    """A call stopped before it ran: one `tool.failed` event and no `tool.invoked`."""
    tool = call.tool
    tool_id = tool.tool_id if tool is not None else str(call.ref)
    name = tool.name if tool is not None else str(call.ref)
    duration_ms = round((_perf() - call.started) * 1000, 3)  # microseconds, not 14 digits
    if executor.events.sinks:
        kind = tool.tool_type.value if tool is not None else None
        fields = call_fields(tool_id, name, kind, ids(call.context), call.number)
        given = call.args if call.args is not None else call.input
        event = ToolEvent(
            type="tool.failed", input=given, error=error.message, error_type=error.error_type,
            duration_ms=duration_ms, attempts=0, **fields,
        )  # fmt: skip
        executor.events.emit(event, on_loop=call.on_loop)
    if tool is not None:
        executor.metrics_recorder.record(tool.tool_id, duration_ms, error.error_type)
    return ToolResult(
        tool_id=tool_id, name=name, success=False, error=error.message, error_type=error.error_type,
        error_field=error.field, duration_ms=duration_ms, attempts=0,
        metadata=dict(getattr(error, "details", None) or {}),  # approval_id, retry_after_s
    )  # fmt: skip


class _Stage:
    __slots__ = ("executor",)

    def __init__(self, executor: ToolExecutor) -> None:
        self.executor = executor

    def applies(self, route: Route) -> bool:
        """Whether calls of the route's tool version have anything to do here (default: always)."""
        return True


class Resolve(_Stage):
    """The tool the reference names, as its run sees the catalogue; unknown and disabled tools refused.
    It finds the route, so it runs before the route's own stages (`ToolExecutor._pipeline`)."""

    __slots__ = ()

    def run(self, call: Call) -> Outcome:
        executor = self.executor
        tool = executor.registry.resolve_for(call.ref, call.context)
        if tool is None:
            hint = tool_hint(executor.registry, call.ref)  # "did you mean"
            return refuse(
                executor, call, ToolNotFoundError(f"No tool matches {call.ref!r}{hint}", field="tool")
            )
        call.tool = tool
        if tool.status is ToolStatus.DISABLED:
            error = ToolDisabledError(f"Tool {tool.tool_id!r} is disabled", tool_id=tool.tool_id)
            return refuse(executor, call, error)
        route = call.route = executor.routes.route(tool)
        if route.runs is None:  # a new tool version: the stages that apply to it, chosen once
            executor.plan_route(route)
        return None


class Permissions(_Stage):
    """What the tool needs must be within what the caller's scope grants (None: unrestricted)."""

    __slots__ = ()

    def applies(self, route: Route) -> bool:
        return bool(route.tool.permissions)

    def run(self, call: Call) -> Outcome:
        granted = call.context.granted_permissions
        if granted is None:
            return None
        missing = permission_refusal(call.tool, granted)
        return None if missing is None else refuse(self.executor, call, missing)


class Budget(_Stage):
    """The call counts against its scope's budget meter: calls, depth, fan-out, time (the output when it
    ends: `ToolExecutor._pipeline`)."""

    __slots__ = ()

    def run(self, call: Call) -> Outcome:
        meter = call.context.budget
        if meter is None:
            return None
        meter.enter()
        call.metered = True
        spent = admit(call.tool, call.context)
        return None if spent is None else refuse(self.executor, call, spent)


class Validate(_Stage):
    """The input normalised and checked against the tool's compiled input schema."""

    __slots__ = ()

    def run(self, call: Call) -> Outcome:
        args = call.route.checked_input(call.input)  # type: ignore[union-attr]
        if isinstance(args, ToolError):
            return refuse(self.executor, call, args)
        call.args = args
        return None


class Replay(_Stage):
    """A recorded run answers the call in order, with its events marked `replayed`; no tool runs."""

    __slots__ = ()

    def applies(self, route: Route) -> bool:
        return self.executor.replay is not None

    def run(self, call: Call) -> Outcome:
        executor = self.executor
        recording = executor.replay
        assert recording is not None
        return recording.answer(executor, call)


class Governance(_Stage):
    """The hooks' `before`, the approval and the quotas (`echo_tools.governance`); may deny, change the
    arguments (validated again), hold the call for a person, or answer it with the approved call's result."""

    __slots__ = ()

    def applies(self, route: Route) -> bool:  # asked again whenever hooks, policy or quotas change
        return self.executor.governance.plan(route.tool) is not None

    def run(self, call: Call) -> Outcome:
        plan = self.executor.governance.plan(call.tool)
        if plan is None:
            return None
        route = call.route
        assert route is not None
        verdict = plan.before(call, route.checked_input, call.on_loop)
        if verdict is call.args:
            return None
        if verdict is OFF_LOOP:  # a database answers (approvals, quota counts): wait off the loop
            return self._off_loop(call)
        return self._verdict(call, verdict)

    async def _off_loop(self, call: Call) -> ToolResult | None:
        route = call.route
        assert route is not None
        return self._verdict(call, await self.executor.governance.before_off_loop(call, route.checked_input))

    def _verdict(self, call: Call, verdict: Any) -> ToolResult | None:
        if isinstance(verdict, ToolError):
            return refuse(self.executor, call, verdict)
        if isinstance(verdict, ToolResult):  # the approved call ran before: its result, not a second run
            return verdict
        call.args = cast("dict[str, Any]", verdict)
        return None


def announce(executor: ToolExecutor, call: Call) -> None:
    """`tool.invoked`: the call is about to run (its fields are shared by its closing event)."""
    if executor.events.sinks:
        tool, route = call.tool, call.route
        assert route is not None
        context = call.context
        fields = call_fields(
            tool.tool_id, tool.name, route.kind, None if context is NO_CONTEXT else context, call.number
        )
        call.fields = fields
        executor.events.emit(
            ToolEvent(type="tool.invoked", input=call.args, **fields), route.flat_keys, on_loop=call.on_loop
        )


class Cache(_Stage):
    """A deterministic, pure tool answered from its kept result of the same arguments (once announced)."""

    __slots__ = ()

    def applies(self, route: Route) -> bool:
        return route.cache_ttl_s is not None

    def run(self, call: Call) -> Outcome:
        announce(self.executor, call)
        cache = self.executor.result_cache
        key = cache.key(call.tool, call.args)
        hit = cache.get(key, call.tool) if key is not None else None
        if hit is None:
            return None
        call.output = BackendOutput(hit.output, {**hit.metadata, "cached": True})
        return None


class Attempts(_Stage):
    """The backend under the deadline, attempt after attempt as `retry` decides. Only how it waits differs
    between callers: `invoke` awaits on its loop; `invoke_sync` blocks its thread, so it never suspends."""

    __slots__ = ()

    def run(self, call: Call) -> Outcome:
        route = call.route
        assert route is not None
        if route.cache_ttl_s is not None:  # the cache stage announced it, and may have answered it
            return None if call.output is not None else self._attempts(call)
        executor = self.executor
        if executor.events.sinks:  # `announce`, written out: this is every call's path
            tool, context = call.tool, call.context
            fields = call_fields(
                tool.tool_id, tool.name, route.kind, None if context is NO_CONTEXT else context, call.number
            )
            call.fields = fields
            event = ToolEvent(type="tool.invoked", input=call.args, **fields)
            executor.events.emit(event, route.flat_keys, on_loop=call.on_loop)
        return self._attempts(call)

    async def _attempts(self, call: Call) -> None:
        tool = call.tool
        timeout_ms = call.context.timeout_ms or tool.timeout_ms
        meter = call.context.budget
        if meter is not None:  # never past the request's or run's own deadline
            timeout_ms = max(1.0, min(timeout_ms, meter.remaining_s() * 1000))
        while True:
            call.attempts += 1
            try:
                call.output = await self._attempt(call, timeout_ms / 1000)
                return None
            # the caller gave up (task cancelled, Ctrl-C while waiting): close the call, pass it on
            except (asyncio.CancelledError, KeyboardInterrupt):
                call.error = cancelled_error(tool)
                close(self.executor, call)
                raise
            except Exception as exc:  # boundary: translated into the call's error at this one edge
                error = as_tool_error(exc, tool, timeout_ms)
            if not retry.again(tool, error, call.attempts):
                call.error = error
                return None
            if call.on_loop:
                await asyncio.sleep(retry.backoff_s(tool, call.attempts))
            else:
                time.sleep(retry.backoff_s(tool, call.attempts))

    async def _attempt(self, call: Call, timeout_s: float) -> Any:
        """One attempt: a plain sync function inline or on a worker thread, else the backend's `call`."""
        executor, route, args = self.executor, call.route, call.args
        assert route is not None
        sync = route.sync
        if sync is UNDECIDED:  # the first call: may import the tool's module, so never on a loop
            backend = executor.backend_for(call.tool.tool_type)
            if call.on_loop:  # shielded: a waiter cancelled must not cancel the answer the others wait for
                sync = await asyncio.shield(asyncio.wrap_future(route.decide_sync_elsewhere(backend)))
            else:
                sync = route.decide_sync(backend)
        if sync is not None:  # a plain sync function: inline, or on a worker thread waited for directly
            if sync.inline:
                return run_inline(sync.fn, args, timeout_s)
            if call.on_loop:
                return await await_in_worker(sync.fn, timeout_s, args)
            return call_in_worker(sync.fn, timeout_s, args)
        if not call.on_loop:  # the backend's async call, on the background loop
            return run_sync(self._on_loop(call, timeout_s))
        return await self._on_loop(call, timeout_s)

    async def _on_loop(self, call: Call, timeout_s: float) -> Any:
        executor, tool, context = self.executor, call.tool, call.context
        backend = executor.backend_for(tool.tool_type)
        async with asyncio.timeout(timeout_s):
            if backend.nests and context.call_id is None:  # its inner calls name this one as parent
                assert isinstance(call.number, int)
                context = context.model_copy(update={"call_id": format_call_id(call.number)})
            limit = executor.concurrency.get(tool)
            if limit is None:
                return await backend.call(tool, call.args, context)
            async with limit:  # waiting for a slot counts against the deadline too
                return await backend.call(tool, call.args, context)


class Finish(_Stage):
    """The output normalised to a JSON value and checked against `output_schema`, the closing event, the
    metrics, the result; a cached result kept, the hooks' `after` and the approval's record."""

    __slots__ = ()

    def run(self, call: Call) -> Outcome:
        executor = self.executor
        result = close(executor, call)
        route = call.route
        assert route is not None
        cached = call.attempts == 0
        if route.cache_ttl_s is not None and result.success and not cached:
            key = executor.result_cache.key(call.tool, call.args)
            if key is not None:
                executor.result_cache.put(key, call.tool, result.output, result.metadata, route.cache_ttl_s)
        governance = executor.governance
        if governance.afters or call.approval_id is not None:
            plan = governance.plan(call.tool)
            if plan is not None:
                result = plan.after(call, result)
        return result


def close(executor: ToolExecutor, call: Call) -> ToolResult:
    """Steps 7-9 for the outcome of the attempts: the raw output, or the error of the last attempt."""
    tool, route, error, output = call.tool, call.route, call.error, call.output
    assert route is not None
    metadata: dict[str, Any] = {}
    if error is None:
        if type(output) is BackendOutput:
            output, metadata = output.output, dict(output.metadata)
        if type(output) not in _JSON_SCALARS:
            output = to_json_value(output)
        check = route.check_output
        if check is not None and not passes(check, output):
            assert route.output_validator is not None
            problems = describe_problems(route.output_validator, output, "output")
            message = f"Tool {tool.tool_id!r} returned output not matching its output_schema: " + "; ".join(
                problems
            )
            if executor.output_validation == "error":
                error = ToolOutputValidationError(message, tool_id=tool.tool_id, field="output")
                output = None
            else:
                logger.warning("%s", message)
                metadata["output_warnings"] = problems
    duration_ms = round((_perf() - call.started) * 1000, 3)  # microseconds, not 14 digits
    error_type = None if error is None else result_error_type(error)
    if executor.events.sinks:  # exactly one closing event (a failure also carries the input)
        fields = call.fields
        if fields is None:  # a sink added while the call ran
            fields = call_fields(tool.tool_id, tool.name, route.kind, ids(call.context), call.number)
        if error is None:
            event = ToolEvent(
                type="tool.completed", output=output, duration_ms=duration_ms, attempts=call.attempts,
                metadata=metadata, cached=metadata.get("cached"), **fields,
            )  # fmt: skip
        else:
            event = ToolEvent(
                type="tool.timeout" if error_type == "timeout" else "tool.failed", input=call.args,
                error=error.message, error_type=error_type, duration_ms=duration_ms, attempts=call.attempts,
                metadata=metadata, **fields,
            )  # fmt: skip
        executor.events.emit(event, route.flat_keys, on_loop=call.on_loop)
    executor.metrics_recorder.record(tool.tool_id, duration_ms, error_type)
    if error is None:
        return ToolResult(
            tool_id=tool.tool_id, name=tool.name, output=output, duration_ms=duration_ms,
            attempts=call.attempts, metadata=metadata,
        )  # fmt: skip
    return ToolResult(
        tool_id=tool.tool_id, name=tool.name, success=False, error=error.message, error_type=error_type,
        error_field=error.field, duration_ms=duration_ms, attempts=call.attempts, metadata=metadata,
    )  # fmt: skip


# the pipeline, in order (attempts announce the call with `tool.invoked`, or the cache does before it looks)
STAGES = (Resolve, Permissions, Budget, Validate, Replay, Governance, Cache, Attempts, Finish)
