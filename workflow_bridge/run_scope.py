"""Composite runs in progress, and the context their agents' tool calls carry.

A `workflow` or `agent` tool call files what its inner calls inherit (granted permissions, the time left,
`depth + 1`, the chain of composite tools, the parent call id) under its sub-run id with `filed`;
`scoped_context`, which `CrewAIAdapter.context` calls, reads it back in whatever thread the node runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from echo_tools.errors import ToolTimeoutError
from echo_tools.models import ToolContext
from echo_tools.stored_tools import agent_permissions


@dataclass
class SubRun:
    """What the tool calls of one composite run inherit."""

    inner: ToolContext  # granted permissions, depth + 1, call_path, parent_call_id, trace id
    deadline: float  # time.monotonic()
    stopped: bool = False


_RUNS: dict[str, SubRun] = {}
_RUNS_LOCK = threading.Lock()


def scoped_context(agent: Mapping[str, Any], context: ToolContext) -> ToolContext:
    """The context an agent's tool calls carry.

    Inside a composite run (found by `context.run_id`) it inherits the composite call's granted
    permissions, remaining deadline, depth, call path and parent call id; an agent JSON's `permissions`
    list then narrows the grant to exactly those (intersected with the caller's).

    Raises:
        ToolTimeoutError: the composite call that runs this workflow has already ended (deadline or cancel).
        ValueError: the agent's `permissions` list names an unknown permission.
    """
    run = _RUNS.get(context.run_id) if context.run_id else None
    update: dict[str, Any] = {}
    if run is not None:
        remaining_ms = int((run.deadline - time.monotonic()) * 1000)
        if run.stopped or remaining_ms <= 0:
            raise ToolTimeoutError(f"run {context.run_id!r} was stopped: its composite tool call has ended")
        inner = run.inner
        update = {
            "granted_permissions": inner.granted_permissions,
            "timeout_ms": remaining_ms,
            "depth": inner.depth,
            "call_path": list(inner.call_path),
            "parent_call_id": inner.parent_call_id,
            "trace_id": context.trace_id or inner.trace_id,
            # the gate: the request's budget meter (shared), the principal and the end user it acts for
            "budget": inner.budget,
            "principal": inner.principal,
            "user_id": inner.user_id,
        }
    granted = agent_permissions(agent)
    if granted is not None:
        caller = update.get("granted_permissions", context.granted_permissions)
        update["granted_permissions"] = granted if caller is None else [p for p in granted if p in caller]
    return context.model_copy(update=update) if update else context


@contextmanager
def filed(run_id: str, entry: SubRun) -> Iterator[None]:
    """`entry` is what the calls of run `run_id` inherit while the block runs."""
    with _RUNS_LOCK:
        _RUNS[run_id] = entry
    try:
        yield
    finally:
        with _RUNS_LOCK:
            _RUNS.pop(run_id, None)
