"""A recorded run's tool calls, answered again in order: what `ToolExecutor(..., replay=...)` consults.

`RunHistory(...).recording(run_id)` (or `Recording(events)`) pairs each recorded top-level call's
`tool.invoked` with its outcome, queued per tool in the order they ran. An executor given the recording
runs steps 1-4 as always (resolve, permissions, normalise, validate), then answers the call from the queue
instead of running the tool: its `tool.invoked` and closing events carry `metadata.replayed: true`. A call
the recording does not hold (another tool, other input, one call too many) is answered as a failed call
whose error names it, and `mismatch` keeps the first such call for the caller to raise.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from echo_tools.call import NO_CONTEXT
from echo_tools.events import EventBus, ToolEvent, call_fields
from echo_tools.models import ToolDef, ToolResult

if TYPE_CHECKING:
    from echo_tools.call import Call

OUTCOMES = frozenset({"tool.completed", "tool.failed", "tool.timeout"})


class ReplayMismatchError(ValueError):
    """A replay whose calls no longer match the recording; the message names the first call that differs."""


@dataclass
class _Call:
    """One recorded call: the input it was invoked with and the event that closed it (None: never closed)."""

    input: Any
    outcome: ToolEvent | None = None


class _Emitting(Protocol):
    """What answering a call from a recording uses of the executor: its events."""

    @property
    def events(self) -> EventBus: ...


class Recording:
    """The tool calls of one recorded run, handed out in order per tool to an executor replaying it.

    Args:
        events: the run's events, oldest first (`RunHistory.events(run_id=...)` or a JSONL log).
        run_id: the recorded run, named in errors.
    """

    def __init__(self, events: Iterable[ToolEvent], run_id: str | None = None) -> None:
        self.run_id = run_id
        self.decisions: list[Any] = []  # the HITL decisions the run was resumed with, in order
        self._queues: dict[str, deque[_Call]] = {}
        by_call_id: dict[str, _Call] = {}
        for event in events:
            if event.type == "run.resumed":
                self.decisions.append(event.input)
            elif event.parent_call_id is not None:
                continue  # made by a composite call, which the replay answers whole
            elif event.type == "tool.invoked":
                invoked = _Call(event.input)
                self._queues.setdefault(str(event.tool_id), deque()).append(invoked)
                if event.call_id is not None:
                    by_call_id[event.call_id] = invoked
            elif event.type in OUTCOMES:
                call: _Call | None
                call = by_call_id.pop(event.call_id, None) if event.call_id is not None else None
                if call is None and event.call_id is None:  # an old recording without call ids
                    queue = self._queues.get(str(event.tool_id), deque())
                    call = next((c for c in queue if c.outcome is None), None)
                if call is not None:  # else refused before it ran: a replay refuses it again itself
                    call.outcome = event
        self.calls = 0
        self.mismatch: str | None = None
        self._lock = threading.Lock()

    def unused(self) -> int:
        """How many recorded calls were not asked for."""
        return sum(len(queue) for queue in self._queues.values())

    def check(self) -> None:
        """Raise `ReplayMismatchError` naming the first call that differed, if any did."""
        if self.mismatch is not None:
            whose = f"the replay of run {self.run_id!r}" if self.run_id else "the replay"
            raise ReplayMismatchError(f"{whose} no longer matches its recording: {self.mismatch}")

    def _next(self, tool: ToolDef, args: dict[str, Any]) -> tuple[ToolEvent | None, str | None]:
        """The recorded outcome answering this call, or the problem naming why there is none."""
        with self._lock:
            self.calls += 1
            number = self.calls
            queue = self._queues.get(tool.tool_id)
            call = queue.popleft() if queue else None
        if call is None:
            problem = f"call {number} ({tool.tool_id!r} with {args!r:.200}) was not recorded"
        elif call.input is not None and call.input != args:
            problem = (
                f"call {number} ({tool.tool_id!r}) differs from the recording: recorded input "
                f"{call.input!r:.200}, now {args!r:.200}"
            )
        elif call.outcome is None:
            problem = f"call {number} ({tool.tool_id!r}) was recorded without its outcome (the run stopped)"
        else:
            return call.outcome, None
        with self._lock:
            self.mismatch = self.mismatch or problem
        return None, problem

    def answer(self, executor: _Emitting, call: Call) -> ToolResult:
        """The rest of `executor`'s pipeline for a validated call (`echo_tools.call.Call`), answered from
        the recording: its events (marked `replayed`) and its result, no tool run."""
        tool, args, on_loop = call.tool, call.args, call.on_loop
        context = None if call.context is NO_CONTEXT else call.context
        recorded, problem = self._next(tool, args)
        metadata: dict[str, Any] = {"replayed": True}
        error: str | None
        error_type: str | None
        if recorded is None:
            whose = f"replay of run {self.run_id!r}" if self.run_id else "replay"
            kind, output, error, error_type = "tool.failed", None, f"{whose}: {problem}", "validation"
            duration_ms, attempts = 0.0, 0
        else:
            kind, output, error, error_type = (
                recorded.type,
                recorded.output,
                recorded.error,
                recorded.error_type,
            )
            duration_ms, attempts = recorded.duration_ms or 0.0, recorded.attempts or 1
            metadata["recorded_event_id"] = recorded.event_id
        success = kind == "tool.completed"
        if executor.events.sinks:
            fields = call_fields(tool.tool_id, tool.name, tool.tool_type.value, context, call.number)
            invoked = ToolEvent(type="tool.invoked", input=args, metadata={"replayed": True}, **fields)
            executor.events.emit(invoked, on_loop=on_loop)
            closing = ToolEvent(
                type=kind, input=None if success else args, output=output if success else None,
                error=error, error_type=error_type, duration_ms=duration_ms, attempts=attempts,
                metadata=dict(metadata), **fields,
            )  # fmt: skip
            executor.events.emit(closing, on_loop=on_loop)
        return ToolResult(
            tool_id=tool.tool_id, name=tool.name, success=success, output=output if success else None,
            error=None if success else error, error_type=None if success else error_type,
            duration_ms=duration_ms, attempts=attempts, metadata=metadata,
        )  # fmt: skip
