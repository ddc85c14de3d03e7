"""`echo-tools runs show RUN_ID`: one run as a person reads it.

Its status (the one vocabulary of docs/runs.md), workflow, owner and timings; the error it stopped on and
the failed calls it lists; its tool calls as a tree (a composite call's inner calls under it, through
`parent_call_id`), each with its agent, duration and outcome; then its final state (`crew_result` and
`result` in full, the other keys named). `--json` gives the same as one object.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from echo_tools.cli.output import short

__all__ = ["call_tree", "final_state", "show_run"]

_OUTCOMES = {"tool.completed": "ok", "tool.failed": "failed", "tool.timeout": "timeout"}
_SHOWN_STATE = ("crew_result", "result")  # shown in full; other state keys are named


def call_tree(events: Iterable[Any]) -> list[dict[str, Any]]:
    """The run's tool calls as a tree: `{call_id, tool_id, tool_name, agent, status, duration_ms, error,
    calls}` per call, inner calls (`parent_call_id`) under the call that made them, in call order."""
    calls: dict[str, dict[str, Any]] = {}
    roots: list[dict[str, Any]] = []
    for event in events:
        key = str(event.call_id or event.event_id)
        if event.type == "tool.invoked":
            call = {
                "call_id": key,
                "tool_id": event.tool_id,
                "tool_name": event.tool_name,
                "agent": event.agent_name or event.agent_id,
                "status": "running",
                "duration_ms": None,
                "error": None,
                "calls": [],
            }
            calls[key] = call
            parent = calls.get(str(event.parent_call_id)) if event.parent_call_id else None
            (parent["calls"] if parent is not None else roots).append(call)
        elif event.type in _OUTCOMES and key in calls:
            calls[key].update(
                status=_OUTCOMES[event.type], duration_ms=event.duration_ms, error=event.error or None
            )
    return roots


def final_state(history: Any, run_id: str) -> dict[str, Any]:
    """The run's last checkpointed state (JSON values), or {} when it has none or it cannot be read here."""
    try:
        saver = history.checkpointer()
        checkpoint = saver.get_tuple({"configurable": {"thread_id": run_id}})
    except Exception:  # boundary: no checkpointer installed, or a state this install cannot read
        return {}
    if checkpoint is None:
        return {}
    values = dict(checkpoint.checkpoint.get("channel_values") or {})
    return dict(json.loads(json.dumps(values, default=str)))


def show_run(history: Any, run_id: str, *, as_json: bool = False) -> int:
    """Print run `run_id` of `history`; CliError naming it when no run has this id."""
    from echo_tools.cli.common import CliError, print_json

    record = history.run(run_id)
    if record is None:
        raise CliError(f"no recorded run has run_id {run_id!r} (echo-tools runs lists the recorded runs)")
    stored = record["source"] if isinstance(record["source"], dict) else {}
    run = {k: v for k, v in record.items() if k != "source"}
    run["took_s"] = _seconds(record["created"], record["updated"])
    answer = {
        "run": run,
        "failed_calls": list(stored.get("failed_calls") or []),
        # kept by the run when it paused: a tool approval (tool, args, agent, approval id), a HITL node, ...
        "waiting_for": list(stored.get("waiting_for") or []) if record["status"] == "interrupted" else [],
        "calls": call_tree(history.run_events(run_id, nested=True)),
        "state": final_state(history, run_id),
    }
    if as_json:
        print_json(answer)
    else:
        sys.stdout.write(_text(answer))
    return 0


def _seconds(start: str, end: str) -> float | None:
    try:
        began = datetime.fromisoformat(start.replace("Z", "+00:00"))
        ended = datetime.fromisoformat(end.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None
    return round((ended - began).total_seconds(), 1)


def _text(answer: dict[str, Any]) -> str:
    run = answer["run"]
    lines = [f"run {run['run_id']}  {run['status']}"]
    took = f"took {run['took_s']} s" if run.get("took_s") is not None else ""
    lines.append(
        f"  workflow {run.get('workflow_id') or '-'}, owner {run.get('owner')}; "
        f"started {run['created']}, last change {run['updated']}; {took}".rstrip("; ")
    )
    if run.get("error"):
        lines.append(f"  error: {run['error']}")
    for pause in answer["waiting_for"]:
        lines.append(f"  waiting for {pause.get('what')}: {pause.get('how')}")
    failed = answer["failed_calls"]
    if failed:
        lines.append(f"failed calls ({len(failed)}):")
        for call in failed:
            who = call.get("agent_name") or call.get("agent_id")
            lines.append(
                f"  ✗ {call.get('tool_id')}{f' by {who}' if who else ''}: {short(call.get('error'), 200)}"
            )
    calls = answer["calls"]
    lines.append(f"calls ({_count(calls)}):")
    lines.extend(_tree_lines(calls, 1))
    state = answer["state"]
    for key in _SHOWN_STATE:
        if key in state and not (key == "result" and state[key] == state.get("crew_result")):  # once
            value = state[key]
            text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
            lines.append(f"{key}:")
            lines.extend(f"  {line}" for line in str(text).splitlines() or [""])
    others = sorted(k for k in state if k not in _SHOWN_STATE)
    if others:
        lines.append(f"state keys: {', '.join(others)}")
    return "\n".join(lines) + "\n"


def _count(calls: list[dict[str, Any]]) -> int:
    return sum(1 + _count(c["calls"]) for c in calls)


def _tree_lines(calls: list[dict[str, Any]], depth: int) -> list[str]:
    marks = {"ok": "✓", "failed": "✗", "timeout": "⏱", "running": "…"}
    lines = []
    for call in calls:
        name = call.get("tool_name") or call.get("tool_id")
        parts = [f"{'  ' * depth}{marks.get(call['status'], '?')} {name} ({call.get('tool_id')})"]
        if call.get("agent"):
            parts.append(f"by {call['agent']}")
        if call.get("duration_ms") is not None:
            parts.append(f"{round(call['duration_ms'], 1)} ms")
        parts.append(call["status"])
        if call.get("error"):
            parts.append(short(call["error"], 160))
        lines.append("  ".join(parts))
        lines.extend(_tree_lines(call["calls"], depth + 1))
    return lines
