"""Replay a recorded run: the workflow runs again under a new run id, each tool call answered from the
recorded events in order (no tool runs; the events carry `replayed: true`), the recorded HITL decisions
applied. The one home of the answering is `echo_tools.history.recording.Recording`, which `ToolExecutor(...,
replay=...)` consults; `ReplayExecutor` is that executor built beside an existing one (same registry and
egress policy), for callers holding the recorded events.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from echo_tools.events import ToolEvent
from echo_tools.executor import ToolExecutor
from echo_tools.history.recording import OUTCOMES, Recording, ReplayMismatchError

__all__ = ["OUTCOMES", "ReplayExecutor", "ReplayMismatchError"]


class ReplayExecutor(ToolExecutor):
    """A `ToolExecutor` answering every call from a recording; runs no tool.

    A call the recording does not hold (another tool, other arguments, one call too many) is answered as a
    failed call, and `mismatch` names the first one; `replay_run` raises it when the run ends.

    Args:
        executor: the executor whose registry and egress policy the replay uses (it runs nothing of it).
        recorded: the run's events oldest first, or a `Recording` (`RunHistory(...).recording(run_id)`).
    """

    def __init__(self, executor: Any, recorded: Iterable[ToolEvent] | Recording) -> None:
        self.recording = recorded if isinstance(recorded, Recording) else Recording(recorded)
        super().__init__(executor.registry, egress=executor.egress, replay=self.recording)

    @property
    def mismatch(self) -> str | None:
        """The first call that differed from the recording, or None."""
        return self.recording.mismatch

    def unused(self) -> int:
        """How many recorded calls were not asked for."""
        return self.recording.unused()
