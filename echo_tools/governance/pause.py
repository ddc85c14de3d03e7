"""Pausing a LangGraph run for a person's approval: the same interrupt MCP elicitation uses.

A node that can pause (CrewAI agent nodes of a canvas run, `ExecutorToolNode`, our tools under LangChain's
`create_agent`) runs its calls inside `graph_pauses()` (`echo_tools.mcp.callbacks`). There, `pause`
raises LangGraph's interrupt wrapped so it passes the executor and the frameworks between the tool and
the node, which re-raises it; when the run resumes, the node runs again and `pause` returns the decision.
LangGraph is imported only here, and only when a call needs an approval.
"""

from __future__ import annotations

from typing import Any

from echo_tools.mcp.callbacks import _PAUSABLE, _graph_interrupt

__all__ = ["graph_position", "pause"]


def graph_position() -> tuple[str, str] | None:
    """(thread id, task) of the graph node that can pause around this call; None anywhere else."""
    if not _PAUSABLE.get():
        return None
    try:
        from langgraph.config import get_config
    except ImportError:
        return None
    try:
        config = get_config()
    except RuntimeError:
        return None  # not inside a LangGraph run
    configurable = config.get("configurable") or {}
    thread = configurable.get("thread_id")
    if thread is None:
        return None  # no checkpointer thread: the run could not be resumed
    return str(thread), str(configurable.get("checkpoint_ns") or "")


def pause(payload: dict[str, Any]) -> Any:
    """The resume value of the run paused with `payload` (raises the pause the first time)."""
    return _graph_interrupt(payload)
