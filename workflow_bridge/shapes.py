"""JSON shapes of the bridge's answers: a canvas diagnostic, a compiled graph's summary (CLI and routes)."""

from __future__ import annotations

from typing import Any


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
