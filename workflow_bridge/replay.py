"""Replay a recorded run: the workflow runs again under a new run id, each tool call answered from the
recorded events in order (no tool runs; the events carry `replayed: true`), the recorded HITL decisions
applied. `ReplayExecutor` wraps a `ToolExecutor` for this without changing it: the bridge only calls
`invoke`, `invoke_sync`, `registry`, `add_sink` and `remove_sink` on an executor.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from echo_tools.events import ToolEvent
from echo_tools.models import ToolContext, ToolResult

OUTCOMES = ("tool.completed", "tool.failed", "tool.timeout")


class ReplayMismatchError(ValueError):
    """A replay whose calls no longer match the recording; the message names the first call that differs."""


class ReplayExecutor:
    """Answers tool calls from a run's recorded outcome events, in order, per tool; runs no tool.

    A call the recording does not hold (another tool, other arguments, one call too many) is answered as a
    failed call, and `mismatch` names the first one; `replay_run` raises it when the run ends.
    """

    def __init__(self, executor: Any, recorded: list[ToolEvent]) -> None:
        self.inner = executor
        self.registry = executor.registry
        self._queues: dict[str, deque[tuple[int, ToolEvent]]] = {}
        for number, event in enumerate((e for e in recorded if e.type in OUTCOMES), start=1):
            self._queues.setdefault(str(event.tool_id), deque()).append((number, event))
        self._sinks: list[Callable[[ToolEvent], Any]] = []
        self._lock = threading.Lock()
        self.calls = 0
        self.mismatch: str | None = None

    def add_sink(self, sink: Callable[[ToolEvent], Any], *, inline: bool | None = None) -> None:
        self._sinks.append(sink)

    def remove_sink(self, sink: Callable[[ToolEvent], Any]) -> None:
        if sink in self._sinks:
            self._sinks.remove(sink)

    def unused(self) -> int:
        """How many recorded calls were not asked for."""
        return sum(len(q) for q in self._queues.values())

    async def invoke(
        self, ref: Any, input_data: dict[str, Any] | None = None, context: ToolContext | None = None
    ) -> ToolResult:
        return self.invoke_sync(ref, input_data, context)

    def invoke_sync(
        self, ref: Any, input_data: dict[str, Any] | None = None, context: ToolContext | None = None
    ) -> ToolResult:
        tool = ref if not isinstance(ref, str) else self.registry.require(ref)
        context = context or ToolContext()
        data = dict(input_data or {})
        with self._lock:
            self.calls += 1
            number = self.calls
            queue = self._queues.get(tool.tool_id)
            recorded = queue.popleft()[1] if queue else None
        if recorded is None:
            problem = f"call {number} ({tool.tool_id!r} with {data!r:.200}) was not recorded"
        elif recorded.input is not None and recorded.input != data:
            problem = (
                f"call {number} ({tool.tool_id!r}) differs from the recording: recorded input "
                f"{recorded.input!r:.200}, now {data!r:.200}"
            )
        else:
            problem = None
        if problem is not None:
            with self._lock:
                self.mismatch = self.mismatch or problem
            result = ToolResult(
                tool_id=tool.tool_id,
                name=tool.name,
                success=False,
                error=f"replay: {problem}",
                error_type="validation",
                metadata={"replayed": True},
            )
            self._emit("tool.failed", tool, data, context, result)
            return result
        assert recorded is not None
        success = recorded.type == "tool.completed"
        result = ToolResult(
            tool_id=tool.tool_id,
            name=tool.name,
            success=success,
            output=recorded.output if success else None,
            error=recorded.error,
            error_type=recorded.error_type,
            duration_ms=recorded.duration_ms or 0.0,
            attempts=recorded.attempts or 1,
            metadata={"replayed": True, "recorded_event_id": recorded.event_id},
        )
        self._emit(recorded.type, tool, data, context, result)
        return result

    def _emit(self, kind: str, tool: Any, data: Any, context: ToolContext, result: ToolResult) -> None:
        common = {
            "tool_id": tool.tool_id,
            "tool_name": tool.name,
            "tool_type": str(getattr(tool.tool_type, "value", tool.tool_type)),
            "agent_id": context.agent_id,
            "workflow_id": context.workflow_id,
            "run_id": context.run_id,
            "node_id": context.node_id,
            "tool_call_id": context.tool_call_id,
            "input": data,
        }
        events = [
            ToolEvent(type="tool.invoked", metadata={"replayed": True}, **common),
            ToolEvent(
                type=kind,
                output=result.output,
                error=result.error,
                error_type=result.error_type,
                duration_ms=result.duration_ms,
                attempts=result.attempts,
                metadata=dict(result.metadata),
                **common,
            ),
        ]
        for event in events:
            for sink in list(self._sinks):
                sink(event)

    def close(self) -> None:
        """Nothing of its own to close; the wrapped executor stays its owner's."""
