"""Response shapes shared by the HTTP API and the CLI's JSON output (no web framework imported here).

The list entry keeps EchoAI's shape exactly, so its IDE reads our `/tools/list` unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from echo_tools.models import ToolDef


def list_item(tool: ToolDef) -> dict[str, Any]:
    """EchoAI's list entry: `{tool_id, name, description, tool_type, status, version, tags}`."""
    return {
        "tool_id": tool.tool_id,
        "name": tool.name,
        "description": tool.description,
        "tool_type": tool.tool_type.value,
        "status": tool.status.value,
        "version": tool.version,
        "tags": list(tool.tags),
    }


def list_items(tools: Iterable[ToolDef]) -> list[dict[str, Any]]:
    """`list_item` of each tool, in order."""
    return [list_item(t) for t in tools]


def diagnostic_dict(diagnostic: Any) -> dict[str, Any]:
    """A `Diagnostic` (dataclass, model or dict) as `{level, node_id, field, message}`."""
    if isinstance(diagnostic, dict):
        return dict(diagnostic)
    return {k: getattr(diagnostic, k, None) for k in ("level", "node_id", "field", "message")}


def compile_summary(graph: Any, mapped: Any) -> dict[str, Any]:
    """`{diagnostics, nodes, edges}` of a compiled LangGraph graph and its `MappedWorkflow`."""
    diagnostics = [diagnostic_dict(d) for d in (getattr(mapped, "diagnostics", None) or [])]
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    if graph is not None:
        drawable = graph.get_graph()
        for node_id, node in drawable.nodes.items():
            nodes.append({"id": str(node_id), "name": str(getattr(node, "name", node_id))})
        for edge in drawable.edges:
            edges.append(
                {
                    "source": str(edge.source),
                    "target": str(edge.target),
                    "conditional": bool(getattr(edge, "conditional", False)),
                }
            )
    return {"diagnostics": diagnostics, "nodes": nodes, "edges": edges}


def event_dict(event: Any) -> dict[str, Any]:
    """A `ToolEvent`, a node event object or a dict -> a plain dict (for SSE frames and the CLI)."""
    if isinstance(event, dict):
        return event
    to_dict = getattr(event, "to_dict", None)
    if callable(to_dict):
        data = to_dict()
        if isinstance(data, dict):
            return data
    return {"type": type(event).__name__, "detail": str(event)}
