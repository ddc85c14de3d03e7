"""The graph plan of a workflow, from its connections: order, entries, routes, joins, fan-out branches,
and the cycles and re-runs that Loop, Map, Failsafe and Self-Review nodes make.

An edge that goes back to a node already on the walk from the entries is a back edge; it must lead into a
Loop (or Map) node, whose body it closes. Every other cycle is an error (nothing would bound it). Without
the back edges the connections form a DAG, ordered as before; the back edges become LangGraph edges of
their own, and the Loop node's route decides each time whether the body runs again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

logger = logging.getLogger("workflow_bridge.compiler")

END_NODE = "__end__"
AGENT_TYPES = {"Agent", "Subagent", "Prompt"}  # the node types that run as CrewAI agents
# nodes that do one piece of work: what a Loop or Map body, a Failsafe or a Self-Review can hold ("Missing":
# an agent not given, compiled with missing_agents="passthrough", stands in for one)
TASK_TYPES = frozenset({"Agent", "Subagent", "Prompt", "API", "Code", "MCP", "Template", "Missing"})
CYCLE_TARGETS = frozenset({"Loop", "Map"})
FAILURE_WORDS = frozenset({"failure", "failed", "fail", "error", "on_failure", "onfailure", "catch"})


class TopologyError(ValueError):
    """A connection problem found while planning; `nodes` are the nodes at fault, in order."""

    def __init__(self, message: str, nodes: list[str], field: str = "connections") -> None:
        super().__init__(message)
        self.nodes = nodes
        self.field = field


@dataclass
class LoopPlan:
    """A Loop (or Map) node's body: its first node, the nodes that lead back, where the run goes after."""

    node: str
    entry: str
    body: list[str]
    tails: list[str]
    exits: list[str]


@dataclass
class GuardPlan:
    """A Failsafe node: the node it guards, and the node its failure edge leads to (None: the end)."""

    node: str
    guarded: str
    failure: str | None


@dataclass
class ReviewPlan:
    """A Self-Review node: the node whose output it checks (and runs again), where the run goes after."""

    node: str
    checked: str
    exits: list[str]


@dataclass
class Topology:
    """The graph plan from the connections: order, entries, routes, joins, fan-out branches."""

    order: list[str]
    types: dict[str, str]
    successors: dict[str, list[str]]
    predecessors: dict[str, list[str]]
    hierarchies: dict[str, list[str]] = field(default_factory=dict)
    routes: dict[str, tuple[Callable[[Mapping[str, Any]], Any], list[str]]] = field(default_factory=dict)
    conditionals: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    joins: dict[str, list[str]] = field(default_factory=dict)
    plain_edges: list[tuple[str, str]] = field(default_factory=list)
    branch_nodes: set[str] = field(default_factory=set)
    back_edges: list[tuple[str, str]] = field(default_factory=list)
    loops: dict[str, LoopPlan] = field(default_factory=dict)
    guards: dict[str, GuardPlan] = field(default_factory=dict)
    reviews: dict[str, ReviewPlan] = field(default_factory=dict)
    edge_conditions: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def entries(self) -> list[str]:
        return [n for n in self.order if not self.predecessors[n]]

    configs: dict[str, Any] = field(default_factory=dict)  # node id -> its checked flow config

    def next_of(self, node: str) -> list[str]:
        """Where the node leads: its successors, then the Loop or Map nodes its back edges go to."""
        return [*self.successors[node], *(t for s, t in self.back_edges if s == node)]

    @classmethod
    def build(cls, workflow: Mapping[str, Any], ids: list[str], types: dict[str, str]) -> Topology:
        """Plan from `workflow["connections"]`; raises `ValueError` on unknown nodes and unbounded cycles."""
        known = set(ids)
        edges: list[tuple[str, str]] = []
        conditions: dict[tuple[str, str], str] = {}
        for index, conn in enumerate(workflow.get("connections") or []):
            source, target = str(conn.get("from")), str(conn.get("to"))
            for end in (source, target):
                if end not in known:
                    raise TopologyError(
                        f"connections[{index}] ({source} -> {target}) names {end!r}, which is not a workflow agent",
                        [source if end == target else target],
                    )
            if source == target:
                raise TopologyError(
                    f"connections[{index}] connects {source!r} to itself; to repeat a node, put it in the "
                    "body of a Loop node (Loop -> node -> back to the Loop)",
                    [source],
                )
            if (source, target) not in edges:
                edges.append((source, target))
                if conn.get("condition"):
                    conditions[(source, target)] = str(conn["condition"])
        hierarchies: dict[str, list[str]] = {}
        if str(workflow.get("execution_model") or "").lower() == "hierarchical":
            ids, edges, hierarchies = _collapse_hierarchy(workflow, ids, types, edges)
        back = _back_edges(ids, edges, types)
        successors: dict[str, list[str]] = {i: [] for i in ids}
        predecessors: dict[str, list[str]] = {i: [] for i in ids}
        for source, target in edges:
            if (source, target) not in back:
                successors[source].append(target)
                predecessors[target].append(source)
        order = _topological(ids, successors, predecessors)
        if not order:
            raise ValueError(f"workflow {workflow.get('workflow_id')!r} has no agents")
        topo = cls(order, types, successors, predecessors, hierarchies)
        topo.back_edges = back
        topo.edge_conditions = conditions
        return topo

    # -- the nodes that route: Conditional, HITL, Loop, Map, Failsafe, Self-Review ------------------------

    def add_conditional(self, node: str, targets: list[tuple[str, str | None]]) -> None:
        self.conditionals[node] = targets
        paths = sorted({t for _, t in targets if t} | {END_NODE})

        def route(state: Mapping[str, Any]) -> str:
            chosen = (state.get("_routes") or {}).get(node)
            return chosen if chosen in paths else END_NODE

        self.routes[node] = (route, paths)

    def add_hitl(self, node: str) -> None:
        from workflow_bridge.nodes import REJECT

        def route(state: Mapping[str, Any]) -> Any:
            if (state.get("_routes") or {}).get(node) == REJECT:
                return END_NODE
            # successors that wait for several predecessors are reached through their join edge
            direct = [s for s in self.next_of(node) if s not in self.joins]
            return direct or END_NODE

        self.routes[node] = (route, [*self.next_of(node), END_NODE])

    def plan_loop(self, node: str, *, mapped: bool = False) -> LoopPlan:
        """The body of a Loop (or, `mapped`, the one node a Map runs on each item).

        With a back edge on the canvas the body is every node on a path from the Loop node to a node that
        leads back; without one, the Loop node's one next node is the body, and what came after that node
        comes after the loop.

        Raises:
            TopologyError: no next node, several ways into the body, or a body node that cannot repeat.
        """
        kind = "Map" if mapped else "Loop"
        tails = [s for s, t in self.back_edges if t == node]
        succ = self.successors[node]
        if not succ:
            raise TopologyError(
                f"the {kind} node leads nowhere: connect it to the node that runs "
                + ("on each item" if mapped else "in each iteration"),
                [node],
                "connections",
            )
        if tails:
            body_set = self._reach(node) & set().union(*(self._coreach(t) for t in tails))
            body_set.discard(node)
            entries = [s for s in succ if s in body_set]
            if len(entries) != 1:
                raise TopologyError(
                    f"the {kind} node's body must start at one node; it starts at {entries or 'none'}",
                    [node],
                )
            body = [n for n in self.order if n in body_set]
            exits = [s for s in self.next_of(node) if s not in body_set]
        else:
            if len(succ) != 1:
                raise TopologyError(
                    f"the {kind} node leads to {len(succ)} nodes ({', '.join(succ)}); it runs one node "
                    + ("on each item" if mapped else "per iteration")
                    + ": connect it to one node, or connect the body's last node back to it",
                    [node],
                )
            entry = succ[0]
            if self.types.get(entry) not in TASK_TYPES:
                raise TopologyError(
                    f"the {kind} node's next node {entry!r} is a {self.types.get(entry)} node, which cannot "
                    f"be {'mapped' if mapped else 'repeated'}; put an Agent, API, Code, MCP or Template node "
                    "there, or connect a longer body's last node back to it",
                    [node],
                )
            exits = self._move_successors(entry, node)
            self.back_edges.append((entry, node))
            body, tails, entries = [entry], [entry], [entry]
        plan = LoopPlan(node, entries[0], body, tails, exits)
        self.loops[node] = plan
        return plan

    def plan_guard(self, node: str) -> GuardPlan:
        """A Failsafe: it guards the node its first connection leads to; its second connection (or one whose
        `condition` says failure) is the failure edge.

        Raises:
            TopologyError: the Failsafe guards nothing, has more than two ways out, or guards a node that
                cannot fail and run again.
        """
        succ = self.successors[node]
        if not succ:
            raise TopologyError(
                "the Failsafe node guards nothing: connect it to the node it protects (and, second, to the "
                "node that runs when that node still fails)",
                [node],
                "connections",
            )
        failing = [s for s in succ if self.edge_conditions.get((node, s), "").lower() in FAILURE_WORDS]
        others = [s for s in succ if s not in failing]
        if len(succ) > 2 or len(failing) > 1 or not others:
            raise TopologyError(
                f"the Failsafe node leads to {', '.join(succ)}; it needs the node it guards and at most one "
                "failure edge",
                [node],
            )
        guarded = others[0]
        failure = next(iter([*failing, *others[1:]]), None)
        if self.types.get(guarded) not in TASK_TYPES:
            raise TopologyError(
                f"the Failsafe node guards {guarded!r}, a {self.types.get(guarded)} node, which cannot fail and "
                "be retried; guard an Agent, API, Code, MCP or Template node",
                [node],
            )
        plan = GuardPlan(node, guarded, failure)
        self.guards[node] = plan
        self.routes[node] = (lambda state: guarded, [guarded])
        return plan

    def plan_review(self, node: str) -> ReviewPlan:
        """A Self-Review checks the output of its one predecessor, which it may send round again.

        Raises:
            TopologyError: no predecessor, several, or one that leads elsewhere too or cannot run again.
        """
        preds = self.predecessors[node]
        if len(preds) != 1:
            raise TopologyError(
                f"the Self-Review node checks the output of the one node before it; it has {len(preds)} "
                f"({', '.join(preds) or 'none'})",
                [node],
            )
        checked = preds[0]
        if self.types.get(checked) not in TASK_TYPES:
            raise TopologyError(
                f"the Self-Review node checks {checked!r}, a {self.types.get(checked)} node, which cannot run "
                "again; put it after an Agent, API, Code, MCP or Template node",
                [node],
            )
        if self.successors[checked] != [node] or any(s == checked for s, _ in self.back_edges):
            raise TopologyError(
                f"the node the Self-Review checks ({checked!r}) leads elsewhere too; running it again would "
                "run those nodes again: let it lead only to the Self-Review node",
                [node],
            )
        plan = ReviewPlan(node, checked, self.next_of(node))
        self.reviews[node] = plan
        return plan

    def _move_successors(self, source: str, to: str) -> list[str]:
        """`source`'s next nodes (and back edges) become `to`'s (the body of a loop without a back edge)."""
        moved = self.successors[source]
        self.successors[source] = []
        for target in moved:
            self.predecessors[target] = [to if p == source else p for p in self.predecessors[target]]
            self.successors[to].append(target)
        back = [t for s, t in self.back_edges if s == source]
        self.back_edges = [(to if s == source else s, t) for s, t in self.back_edges]
        return [*moved, *back]

    def finish(self) -> None:
        """Decide joins (wait for all) versus plain edges, and mark fan-out branches."""
        routed = set(self.conditionals) | set(self.loops) | set(self.reviews) | set(self.guards)
        routed |= {g.guarded for g in self.guards.values()}
        alternatives = self._alternatives()  # once: the reach of every arm, for every join below
        for target in self.order:
            preds = [p for p in self.predecessors[target] if p not in routed]
            if len(preds) > 1 and not _exclusive(preds, alternatives):
                self.joins[target] = preds
            else:
                self.plain_edges.extend((p, target) for p in preds if p not in self.routes)
        for node in self.order:
            if len(self.successors[node]) > 1 and node not in routed:
                self.branch_nodes.update(self.successors[node])

    def _alternatives(self) -> list[list[set[str]]]:
        """For each node that takes one way of several: the nodes each way reaches."""
        found = [[self._reach(t) for _, t in targets if t] for targets in self.conditionals.values()]
        for guard in self.guards.values():
            success = set().union(*(self._reach(s) for s in self.successors[guard.guarded]))
            found.append([success, self._reach(guard.failure) if guard.failure else set()])
        return found

    def _reach(self, start: str) -> set[str]:
        return _walk(start, self.successors)

    def _coreach(self, start: str) -> set[str]:
        return _walk(start, self.predecessors)


def _exclusive(preds: list[str], alternatives: list[list[set[str]]]) -> bool:
    """True when `preds` lie on different arms of one node that takes a single way (a Conditional's
    branches, a guarded node's success path and its Failsafe's failure edge): a join would wait forever."""
    for reach in alternatives:
        arms = [{i for i, r in enumerate(reach) if p in r} for p in preds]
        arms = [a for a in arms if a]
        if any(a.isdisjoint(b) for i, a in enumerate(arms) for b in arms[i + 1 :]):
            return True
    return False


def _walk(start: str, links: Mapping[str, list[str]]) -> set[str]:
    seen: set[str] = set()
    stack = [start]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(links.get(node, []))
    return seen


def _back_edges(
    ids: list[str], edges: list[tuple[str, str]], types: Mapping[str, str]
) -> list[tuple[str, str]]:
    """The edges that close a cycle, found by a depth-first walk from the entries in workflow order.

    Raises:
        TopologyError: a cycle goes back into a node that is not a Loop (or Map) node.
    """
    succ: dict[str, list[str]] = {i: [] for i in ids}
    has_pred: set[str] = set()
    for source, target in edges:
        succ[source].append(target)
        has_pred.add(target)
    roots = [i for i in ids if i not in has_pred] + [i for i in ids if i in has_pred]
    state: dict[str, int] = {}  # 1: on the walk, 2: done
    back: list[tuple[str, str]] = []
    for root in roots:
        if root in state:
            continue
        path = [root]
        work = [(root, iter(succ[root]))]
        state[root] = 1
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                path.pop()
                state[node] = 2
            elif state.get(child) == 1:
                if types.get(child) not in CYCLE_TARGETS:
                    cycle = path[path.index(child) :]
                    raise TopologyError(
                        f"the connections form a cycle: {' -> '.join([*cycle, child])}; nothing bounds it",
                        cycle,
                        field="connections.cycle",
                    )
                back.append((node, child))
            elif child not in state:
                state[child] = 1
                path.append(child)
                work.append((child, iter(succ[child])))
    return back


def _topological(
    ids: list[str], successors: dict[str, list[str]], predecessors: dict[str, list[str]]
) -> list[str]:
    position = {n: i for i, n in enumerate(ids)}
    waiting = {n: len(predecessors[n]) for n in ids}
    ready = sorted((n for n in ids if waiting[n] == 0), key=position.__getitem__)
    order: list[str] = []
    while ready:
        node = ready.pop(0)
        order.append(node)
        for succ in successors[node]:
            waiting[succ] -= 1
            if waiting[succ] == 0:
                ready.append(succ)
                ready.sort(key=position.__getitem__)
    if len(order) < len(ids):  # cannot happen once back edges are out; kept as a guard
        stuck = [n for n in ids if n not in order]
        raise TopologyError(
            f"the connections form a cycle among {', '.join(stuck)}", stuck, "connections.cycle"
        )
    return order


def _collapse_hierarchy(
    workflow: Mapping[str, Any], ids: list[str], types: dict[str, str], edges: list[tuple[str, str]]
) -> tuple[list[str], list[tuple[str, str]], dict[str, list[str]]]:
    """The master and its delegates become one node (the master's id) running a hierarchical crew."""
    spec = workflow.get("hierarchy") or {}
    master = spec.get("master_agent") or next((i for i in ids if types.get(i) in ("Agent", "Subagent")), None)
    if master is None or master not in ids:
        raise ValueError(
            f"hierarchical workflow {workflow.get('workflow_id')!r} has no master agent ({master!r})"
        )
    delegates = [str(d) for d in spec.get("delegation_order") or [] if str(d) in ids and str(d) != master]
    if not delegates:
        delegates = [t for s, t in edges if s == master and types.get(t) in AGENT_TYPES]
    group = set(delegates)
    rename = {d: master for d in group}
    collapsed: list[tuple[str, str]] = []
    for source, target in edges:
        pair = (rename.get(source, source), rename.get(target, target))
        if pair[0] != pair[1] and pair not in collapsed:
            collapsed.append(pair)
    return [i for i in ids if i not in group], collapsed, {master: delegates}


def branch_targets(
    agent: Mapping[str, Any], topo: Topology, agent_map: Mapping[str, Mapping[str, Any]]
) -> list[tuple[str, str | None]]:
    """(condition, target node id) for each branch of a Conditional; `else` has an empty condition.

    Targets are agent ids (NodeMapper remaps them). Raw canvas ids (EchoAI stored the canvas ints) are
    matched through `metadata.canvas_node_id`, else by rank: canvas ids grow in canvas order, so the
    smallest target is the successor that comes first in the workflow's agent list.
    """
    node = str(agent.get("agent_id"))
    meta = agent.get("metadata") or {}
    raw = meta.get("branches") or (agent.get("config") or {}).get("branches") or []
    succ = topo.successors[node]
    if not raw:
        logger.warning("Conditional node %s has no branches; it continues to %s", node, succ[:1] or "END")
        return [("", s) for s in succ[:1]]
    by_canvas = {str((a.get("metadata") or {}).get("canvas_node_id")): i for i, a in agent_map.items()}
    unresolved = [
        b.get("targetNodeId")
        for b in raw
        if isinstance(b, Mapping) and str(b.get("targetNodeId")) not in topo.successors
    ]
    ranked = _rank_map(unresolved, succ, topo.order)
    out: list[tuple[str, str | None]] = []
    for branch in raw:
        if not isinstance(branch, Mapping):
            continue
        condition = (
            "" if str(branch.get("type") or "").lower() == "else" else str(branch.get("condition") or "")
        )
        target = branch.get("targetNodeId")
        resolved = (
            str(target)
            if str(target) in topo.successors
            else by_canvas.get(str(branch.get("canvasTargetNodeId", target))) or ranked.get(str(target))
        )
        if resolved is None:
            logger.warning(
                "Conditional node %s: branch target %r is not a node; that branch ends the run", node, target
            )
        out.append((condition, resolved))
    return out


def _rank_map(targets: Iterable[Any], successors: list[str], order: list[str]) -> dict[str, str]:
    numeric = sorted({int(t) for t in targets if isinstance(t, int) or (isinstance(t, str) and t.isdigit())})
    ordered = sorted(successors, key=order.index)
    if not numeric or len(numeric) != len(ordered):
        return {}
    return {str(t): s for t, s in zip(numeric, ordered, strict=True)}
