"""Running a compiled graph on one thread id and saying how it ended, in one status vocabulary.

`stream_run` runs the graph, reports progress to `on_event` (node events from LangGraph's custom stream,
every tool event of the run, `run.interrupted`, `run.finished` with the status) and, with a history,
records the run's tool events and its status, the same word the CLI, `GET /workflows/runs/{run_id}` and
EchoAI's routes answer:

| status | when |
|---|---|
| `running` | the run is under way (or its process died before it ended) |
| `interrupted` | a HITL node paused it: it waits for a decision (`resume_run`) |
| `completed` | it reached the end, and no tool call and no node failed (a call a reviewer rejected is a decision, not a failure) |
| `completed_with_errors` | it reached the end, but some tool calls (or nodes) failed: `failed_calls` lists them |
| `failed` | it stopped on an error (the error says which) |
| `cancelled` | it was stopped (Ctrl-C, a cancelled task) or a paused run was cancelled (`cancel_run`) |
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from workflow_bridge.decisions import waiting_for
from workflow_bridge.llm_rehearsal import REHEARSAL_NOTICE
from workflow_bridge.run_source import uses_rehearsal

logger = logging.getLogger("workflow_bridge.runner")

EventCallback = Callable[[dict[str, Any]], Any]
RUN_STATUSES = ("running", "interrupted", "completed", "completed_with_errors", "failed", "cancelled")
SUCCESSFUL_STATUSES = ("completed", "interrupted")  # `echo-tools run` exits 0 for these, 1 otherwise
FAILED_CALL_TYPES = ("tool.failed", "tool.timeout")
# a call a reviewer rejected is a person's decision, not a tool failure: the model is told and may go on
DECISION_ERROR_TYPES = ("rejected",)
_MAX_LISTED = 100  # failed calls kept with a run (the events keep them all)


def exit_code(status: str | None) -> int:
    """The exit code of `echo-tools run` / `resume` for a run that ended with `status`."""
    return 0 if status in SUCCESSFUL_STATUSES else 1


def _judged_calls(chunk: dict[str, Any], listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The calls a failed tool node judged failed although the tool ran (a Code program that exited 1):
    listed among the run's failed calls, once (a call that failed as a call is listed already)."""
    node_id = chunk.get("node_id")
    known = {(c.get("node_id"), c.get("tool_id")) for c in listed}
    return [
        {"tool_id": call.get("tool_id"), "node_id": node_id, "agent_name": chunk.get("name"),
         "error_type": call.get("error_type") or "execution", "error": str(call.get("error") or "")[:500]}
        for call in chunk.get("failed_tools") or []
        if (node_id, call.get("tool_id")) not in known
    ]  # fmt: skip


def failed_call(event: Any) -> dict[str, Any]:
    """What a run lists of one failed tool call (a `tool.failed` / `tool.timeout` event)."""
    return {
        "tool_id": event.tool_id,
        "tool_name": event.tool_name,
        "agent_id": event.agent_id,
        "agent_name": event.agent_name,
        "node_id": event.node_id,
        "call_id": event.call_id,
        "error_type": event.error_type,
        "error": (event.error or "")[:500],
        "event_id": event.event_id,
        "timestamp": event.timestamp,
    }


def stream_run(
    graph: Any,
    graph_input: Any,
    run_id: str,
    *,
    executor: Any,
    on_event: EventCallback | None = None,
    started: dict[str, Any] | None = None,
    history: Any = None,
    keep: Callable[[], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run a compiled graph on thread `run_id`, reporting progress to `on_event`; returns the final state.

    With `history` (a `RunHistory`), the run's tool events are kept there and its status set at the end
    (see the module's table); the failed calls of earlier segments of the run (before a pause) count too.
    `keep()` gives what else the run's record keeps when it stops (its scope, with the budget's totals).
    """
    emit = _safe(on_event)
    emit(started or {"type": "run.started", "run_id": run_id})
    if uses_rehearsal(graph):
        logger.warning(REHEARSAL_NOTICE)
        emit({"type": "llm.rehearsal", "run_id": run_id, "message": REHEARSAL_NOTICE})
    config = {"configurable": {"thread_id": run_id}}
    nested = f"{run_id}/"  # sub-runs of `workflow` / `agent` tools called in this run (composite.py)
    failed = _earlier_failures(history, run_id)
    failed_nodes: list[str] = []

    def forward(event: Any) -> None:
        if event.run_id == run_id or (event.run_id or "").startswith(nested):
            if history is not None:
                history.record(event)
            if event.type in FAILED_CALL_TYPES and event.error_type not in DECISION_ERROR_TYPES:
                failed.append(failed_call(event))
            emit(event.to_dict())  # `agent_name` comes from the calling agent's context

    executor.add_sink(forward)
    interrupts: list[Any] = []
    try:
        for mode, chunk in graph.stream(graph_input, config, stream_mode=["updates", "custom"]):
            if mode == "custom" and isinstance(chunk, dict):
                if chunk.get("type") == "node.finished" and chunk.get("status") == "failed":
                    failed_nodes.append(str(chunk.get("node_id")))
                    failed.extend(_judged_calls(chunk, failed))
                emit({**chunk, "run_id": run_id})
            elif mode == "updates" and isinstance(chunk, dict) and "__interrupt__" in chunk:
                interrupts.extend(chunk["__interrupt__"])
                values = [getattr(i, "value", i) for i in chunk["__interrupt__"]]
                emit({"type": "run.interrupted", "run_id": run_id, "interrupts": values})
    except BaseException as exc:
        _stopped(exc, run_id, history, emit, failed, keep)
        raise
    finally:
        executor.remove_sink(forward)
    snapshot = graph.get_state(config)
    final = dict(snapshot.values)
    if interrupts:
        final["__interrupt__"] = interrupts
    status = (
        "interrupted" if interrupts else "completed_with_errors" if failed or failed_nodes else "completed"
    )
    error = _failure_summary(failed, failed_nodes) if status == "completed_with_errors" else None
    if history is not None:
        # the nodes the checkpoint waits at: a resume checks the recompiled graph still has them
        details = {
            "paused_at": list(snapshot.next) if interrupts else [],
            # what it waits for (a tool approval, a HITL node, an MCP server's question): shown by `runs show`
            "waiting_for": waiting_for({"__interrupt__": interrupts}, run_id),
            "failed_calls": failed[:_MAX_LISTED],
            **(keep() if keep is not None else {}),
        }
        history.set_status(run_id, status, error, details=details)
        # the run's events are written when this returns: another process (a resume, a replay, the run
        # viewer) reads the whole run, not what the history's writer had reached
        history.flush()
    finished: dict[str, Any] = {"type": "run.finished", "run_id": run_id, "status": status}
    if failed or failed_nodes:
        finished.update(failed_calls=failed, failed_nodes=failed_nodes, error=error)
    emit(finished)
    return final


def _stopped(
    exc: BaseException,
    run_id: str,
    history: Any,
    emit: EventCallback,
    failed: list[Any],
    keep: Callable[[], dict[str, Any]] | None = None,
) -> None:
    """Record and report a run that stopped on `exc`: `cancelled` when it was stopped, else `failed`."""
    stopped = isinstance(exc, (KeyboardInterrupt, asyncio.CancelledError))
    status = "cancelled" if stopped else "failed"
    error = f"{type(exc).__name__}: {exc}"[:2000]
    if history is not None:
        details = {
            "paused_at": [], "waiting_for": [], "failed_calls": failed[:_MAX_LISTED], **(keep() if keep else {})
        }  # fmt: skip
        history.set_status(run_id, status, error, details=details)
        history.flush()
    emit({"type": "run.finished", "run_id": run_id, "status": status, "error": error})


def _earlier_failures(history: Any, run_id: str) -> list[dict[str, Any]]:
    # a resumed run carries on the list of the segments before its pause
    record = history.run(run_id) if history is not None else None
    stored = record.get("source") if record else None
    earlier = stored.get("failed_calls") if isinstance(stored, Mapping) else None
    return list(earlier) if isinstance(earlier, list) else []


def _failure_summary(failed: list[dict[str, Any]], failed_nodes: list[str]) -> str:
    parts = []
    if failed:
        tools = ", ".join(dict.fromkeys(str(c.get("tool_id")) for c in failed))
        parts.append(f"{len(failed)} tool call(s) failed ({tools})")
    if failed_nodes:
        parts.append(f"{len(failed_nodes)} node(s) failed ({', '.join(failed_nodes)})")
    return "; ".join(parts)


def _safe(on_event: EventCallback | None) -> EventCallback:
    def emit(event: dict[str, Any]) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:  # boundary: a broken progress callback must not break the run
            logger.exception("on_event callback raised on %s", event.get("type"))

    return emit
