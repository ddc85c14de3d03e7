"""Graph-level checks of a mapped canvas: EchoAI's execution-model inference and cycle detection."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

BRANCHING_TYPES = frozenset({"Conditional", "Loop"})


def infer_execution_model(node_types: Mapping[str, str], edges: Iterable[tuple[str, str]]) -> str:
    """EchoAI's `_infer_execution_model` (node_mapper L416-451), on canvas node ids.

    Any Subagent: hierarchical. Any Map: parallel, or hybrid with a Conditional. Otherwise a node with more
    than one outgoing edge gives hybrid when a Conditional or Loop exists, else parallel; else sequential.
    """
    types = set(node_types.values())
    if "Subagent" in types:
        return "hierarchical"
    if "Map" in types:
        return "hybrid" if "Conditional" in types else "parallel"
    out_degree: dict[str, int] = {}
    for src, _ in edges:
        out_degree[src] = out_degree.get(src, 0) + 1
    fan_out = any(n > 1 for n in out_degree.values())
    if fan_out and types & BRANCHING_TYPES:
        return "hybrid"
    return "parallel" if fan_out else "sequential"


def cycles(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected components that hold a cycle (Tarjan, iterative), in node order."""
    order = list(nodes)
    succ: dict[str, list[str]] = {n: [] for n in order}
    self_loops = set()
    for src, dst in edges:
        succ.setdefault(src, []).append(dst)
        if src == dst:
            self_loops.add(src)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    rank = {n: i for i, n in enumerate(order)}
    counter = 0
    for root in order:
        if root in index:
            continue
        work = [(root, iter(succ.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ.get(child, ()))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in self_loops:
                    found.append(sorted(component, key=lambda n: rank.get(n, len(rank))))
    return found
