"""Synthetic EchoAI canvases of any size, for the mapping and compile benchmarks.

`make_canvas(n)` gives a canvas save payload: Start, n - 2 middle nodes, End. Middle nodes are Agents with
one registered tool each (in the IDE's registered-tool shape); with `branching`, every tenth node is a
Conditional whose two branches rejoin two nodes later, so the execution model is hybrid.
"""

from __future__ import annotations

from typing import Any

DEFAULT_TOOLS = ("tool_calculator", "tool_code_reviewer")


def make_canvas(
    n: int = 50,
    *,
    tools: tuple[str, ...] = DEFAULT_TOOLS,
    branching: bool = True,
    workflow_id: str | None = "wf_bench_canvas",
) -> dict[str, Any]:
    """A canvas save payload with `n` nodes (n >= 2).

    Args:
        n: number of nodes, Start and End included.
        tools: tool ids handed out round-robin to the Agent nodes (empty: agents without tools).
        branching: put a Conditional every tenth node.
        workflow_id: the payload's workflow id (None: the mapper mints one).
    """
    if n < 2:
        raise ValueError(f"a canvas needs at least Start and End, got n={n!r}")
    conditionals = {i for i in range(10, n - 2, 10)} if branching else set()
    nodes: list[dict[str, Any]] = [_node(1, "Start", "Start", {"inputVariables": [_var("task")]})]
    for i in range(2, n):
        if i in conditionals:
            branches = [
                {"type": "if", "condition": f"score > {i}", "targetNodeId": i + 1},
                {"type": "else", "condition": "", "targetNodeId": i + 2},
            ]
            nodes.append(_node(i, "Conditional", f"Gate {i}", {"branches": branches}))
            continue
        config: dict[str, Any] = {
            "prompt": f"Step {i}: work on the task and hand over to the next agent.",
            "tools": [],
            "temperature": 0.2,
            "maxIterations": 3,
        }
        if tools:
            tool_id = tools[i % len(tools)]
            config["tools"] = [
                {
                    "id": 10_000 + i,
                    "tool_id": tool_id,
                    "name": tool_id,
                    "type": "local",
                    "enabled": True,
                    "config": {"type": "object", "properties": {}},
                }
            ]
        nodes.append(_node(i, "Agent", f"Agent {i}", config))
    nodes.append(_node(n, "End", "End", {"outputVariables": [_var("result")]}))

    edges: list[tuple[int, int]] = []
    skip: set[tuple[int, int]] = set()
    for c in conditionals:
        edges += [(c, c + 1), (c, c + 2), (c + 1, c + 3), (c + 2, c + 3)]
        skip |= {(c, c + 1), (c + 1, c + 2), (c + 2, c + 3)}
    edges += [(i, i + 1) for i in range(1, n) if (i, i + 1) not in skip]
    connections = [{"id": 50_000 + k, "from": a, "to": b} for k, (a, b) in enumerate(sorted(set(edges)))]
    return {
        "canvas_nodes": nodes,
        "connections": connections,
        "workflow_name": f"Bench canvas ({n} nodes)",
        "save_as": "draft",
        "execution_model": "sequential",
        "workflow_id": workflow_id,
    }


def _node(node_id: int, node_type: str, name: str, config: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": node_id,
        "type": node_type,
        "name": name,
        "label": node_type,
        "x": 100 + 250 * node_id,
        "y": 300,
        "status": "idle",
        "config": config,
    }


def _var(name: str) -> dict[str, Any]:
    return {"name": name, "type": "string", "required": True}
