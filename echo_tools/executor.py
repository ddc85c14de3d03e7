"""ToolExecutor: the single path every tool call takes, whoever asks (CrewAI, LangGraph, the API, the CLI).

A call is one object (`echo_tools.call.Call`) moved through a declared list of stages
(`echo_tools.stages.STAGES`: resolve, permissions, budget, validate, replay, governance, announce, cache,
attempts, finish), each with one job; `_pipeline` below is the whole of the loop. Tool failures are
results; only misuse of the API raises. Every call gets an id that all its events carry (`call_id`); a
backend that `nests` gets it in the context it runs with, so the calls it makes name it as their parent.

`invoke` runs the stages on the caller's event loop; `invoke_sync` runs the same coroutine in the calling
thread with waits that block, so it never suspends and needs no loop (`echo_tools.inline.drive`).
What is decided once per tool version lives in `routes`, the error table in `outcomes`, retries in `retry`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from echo_tools.backends.catalog import backend_class
from echo_tools.call import NO_CONTEXT, Call
from echo_tools.egress import EgressPolicy
from echo_tools.events import EventBus, EventSink, next_call_number
from echo_tools.governance.stage import Governance
from echo_tools.inline import drive
from echo_tools.limits import ConcurrencyLimits
from echo_tools.metrics import MetricsRecorder
from echo_tools.models import ToolContext, ToolDef, ToolResult, ToolType
from echo_tools.result_cache import ResultCache
from echo_tools.routes import Route, RouteTable
from echo_tools.runtime import refuse_in_loop, run_sync
from echo_tools.stages import STAGES, Stage

if TYPE_CHECKING:
    from echo_tools.backends.base import ToolBackend
    from echo_tools.gate import PrincipalLookup
    from echo_tools.governance.approvals import ApprovalPolicy, ApprovalRecord, ApprovalStore
    from echo_tools.governance.quotas import QuotaCounter
    from echo_tools.history.recording import Recording
    from echo_tools.models import Quota
    from echo_tools.registry import ToolRegistry

CLOSE_FLUSH_S = 5.0  # how long closing waits for queued events to reach their sinks

logger = logging.getLogger("echo_tools.executor")


class ToolExecutor:
    """Runs tools from a `ToolRegistry` with validation, limits, retries, events and metrics.

    Args:
        registry: where tools are resolved.
        event_sinks: callables receiving each `ToolEvent` (more via `add_sink`).
        egress: what `api` tools (and every outbound request of a backend) may reach; default denies loopback,
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
        self.metrics_recorder = MetricsRecorder()
        self.concurrency = ConcurrencyLimits()  # `max_concurrency` of execution_config: a semaphore per tool
        self._backends: dict[ToolType, ToolBackend] = {}
        self.routes = RouteTable()
        self._lock = threading.RLock()  # re-entrant: a backend being built may ask for another
        # hooks, approvals and quotas: one stage of this pipeline (`echo_tools.governance`)
        self.governance = Governance(
            approval_policy=approval_policy, approvals=approvals, quotas=quotas, quota_counter=quota_counter
        )
        # the declared pipeline (`echo_tools.stages`): resolve, then each route's stages that apply to it
        self.stages: tuple[Stage, ...] = tuple(stage(self) for stage in STAGES)
        self._resolve = self.stages[0].run
        self.governance.changed = self.routes.replan  # a hook, policy or quota changes which stages apply

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
        # a caller may name the call itself (`context.call_id`); else a number, formatted only when read
        return await self._pipeline(
            Call(ref, input_data, context, context.call_id or next_call_number(), True)
        )

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
        refuse_in_loop("ToolExecutor.invoke_sync()", "use 'await executor.invoke(...)' instead")
        context = context or NO_CONTEXT
        call = Call(ref, input_data, context, context.call_id or next_call_number(), False)
        return drive(self._pipeline(call))

    async def _pipeline(self, call: Call) -> ToolResult:
        """Resolve, then the stages of the tool version's route in order, until one ends the call (the last,
        finish, always does)."""
        result = self._resolve(call)
        if result is not None:
            return result  # type: ignore[return-value]  # refused: resolve never waits
        try:
            for run in call.route.runs:  # type: ignore[union-attr]
                outcome = run(call)
                if outcome is None:
                    continue
                if type(outcome) is not ToolResult:  # a stage that waits
                    outcome = await outcome  # type: ignore[misc]
                    if outcome is None:
                        continue
                result = outcome
                break
        finally:
            if call.metered:  # counted in flight by the budget stage: its output counts too
                over = call.context.budget.leave(None if result is None else result.output)
                if over is not None and result is not None and result.success:
                    result = result.model_copy(
                        update={"success": False, "output": None, "error": over.message,
                                "error_type": "budget", "error_field": over.field}
                    )  # fmt: skip
        assert result is not None  # the finish stage always ends the call
        return result  # type: ignore[return-value]

    def route_of(self, tool: ToolDef) -> Route:
        """What is decided once per tool version (`echo_tools.routes`): validators, fast paths, and the
        stages after resolve that apply to it (`Route.runs`)."""
        route = self.routes.route(tool)
        if route.runs is None:
            self.plan_route(route)
        return route

    def plan_route(self, route: Route) -> None:
        """Choose the stages after resolve that apply to the route's tool version, in their order."""
        route.runs = tuple(stage.run for stage in self.stages[1:] if stage.applies(route))

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
        principals: PrincipalLookup | None = None,
    ) -> tuple[ApprovalRecord, ToolResult | None]:
        """Decide a pending approval: `"approve"`, `"reject"` or `"edit"` (with new `args`, validated).

        An approved call made outside a graph runs now, exactly once, with the scope of the call that asked
        (its principal's ceiling and budget, its end user; never the decider's), and its result is returned
        with the decided record. A tool changed since the approval was asked voids it (status `void`, a
        failed result saying so, nothing run). When this process cannot run the tool (its catalogue has no
        such tool), the decision is kept and the call runs in the process that asked
        (`wait_for_decision`): the result is None and `record.note` says why. An approval of a paused graph
        run is only decided (resume the run to carry on).

        Args:
            principal: who decides (a name); unless `admin`, only an approval of that principal's own calls
                (another's is 404, as if unknown).
            principals: the principals there are now, by name (a server's table): the scope is restored
                with the narrower of its kept ceiling and its principal's current one, and an approval of a
                principal that is gone is void.

        Raises:
            ApprovalDecisionError: unknown approval (404), already decided or expired (409), a bad decision
                or edit arguments that do not validate (422, naming the field; the approval stays pending).
            RuntimeError: called inside a running event loop (call it from a worker thread there).
        """
        from echo_tools.governance.decisions import preparer, validator

        return self.governance.decide(
            approval_id, decision, args=args, validate=validator(self), prepare=preparer(self, principals),
            by=by, comment=comment, principal=principal, admin=admin,
        )  # fmt: skip

    async def wait_for_decision(
        self, approval_id: str, *, timeout_s: float = 300.0, poll_s: float = 0.25,
        principals: PrincipalLookup | None = None,
    ) -> ToolResult:  # fmt: skip
        """Wait (at most `timeout_s`) until a person decides `approval_id`, in this or any process sharing
        the approval store, then carry the decision out here: an approved call not yet run runs now, once,
        with the scope of the call that asked; one that ran elsewhere gives its kept result; a rejected,
        void or expired one a failed result saying so; still pending at the timeout, `approval_required`.

        Raises:
            ApprovalDecisionError: no approval has this id (404).
        """
        from echo_tools.governance.decisions import wait_for_decision

        return await wait_for_decision(
            self, approval_id, timeout_s=timeout_s, poll_s=poll_s, principals=principals
        )

    def add_sink(self, sink: EventSink, *, inline: bool | None = None) -> None:
        """Deliver every later event of this executor to `sink` too (`inline`: see `EventBus.add`)."""
        self.events.add(sink, inline=inline)

    def remove_sink(self, sink: EventSink) -> None:
        self.events.remove(sink)

    def metrics(self) -> dict[str, dict[str, Any]]:
        """Per tool id: `calls`, `failures`, `timeouts`, `p50_ms`, `p95_ms`, `p99_ms`, `max_ms`."""
        return self.metrics_recorder.snapshot()

    def forget(self, tool_id: str | None = None) -> None:
        """Drop cached instances, routes and results (of one tool, or all), e.g. after editing a tool's module."""
        with self._lock:
            self.routes.forget(tool_id)
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
            self.routes.forget()
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
        refuse_in_loop("ToolExecutor.close()", "use 'await executor.aclose()'")
        run_sync(self.aclose())
