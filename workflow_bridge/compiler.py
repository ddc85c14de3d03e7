"""WorkflowCompiler: EchoAI workflow JSON + agent JSONs -> a compiled LangGraph graph with tool-bound agents.

The topology comes from the connections (EchoAI assumed canvas order): entry nodes are those without
incoming edges, nodes without outgoing edges lead to END, a node with several successors fans out (the
branches run concurrently) and a node with several predecessors waits for all of them, unless they are
alternatives of a Conditional. Each canvas node type gets the node that does its job (`nodes.py`,
`crewai_adapter.py`); hierarchical workflows collapse the master and its delegates into one CrewAI
hierarchical crew. Graphs compile with a `MemorySaver` and run as EchoAI runs them:
`graph.invoke(initial_state, {"configurable": {"thread_id": run_id}})`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from workflow_bridge import nodes
from workflow_bridge.agent_json import normalize_agent
from workflow_bridge.conditions import ConditionError, condition_variables, parse_condition
from workflow_bridge.crewai_adapter import CrewAIAdapter
from workflow_bridge.state import build_state_schema

logger = logging.getLogger("workflow_bridge.compiler")

AGENT_TYPES = {"Agent", "Subagent", "Prompt", "Loop", "Map", "Self-Review", "Template", "Failsafe"}
TOOL_TYPES = {"API", "Code", "MCP"}
MISSING_AGENT_MODES = ("error", "passthrough")


class WorkflowCompileError(ValueError):
    """A workflow that cannot become a graph; the message names the node or connection at fault.

    `node_id` and `field` say where, when one node is at fault; `diagnostics` is the error as a list of
    one NodeMapper `Diagnostic` (what `/workflows/compile` and `echo-tools compile` report).
    """

    def __init__(self, message: str, *, node_id: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.field = field

    @property
    def diagnostics(self) -> list[Any]:
        from workflow_bridge.canvas.entries import Diagnostic

        return [Diagnostic("error", self.node_id, self.field, str(self))]


class _TopologyError(ValueError):
    """A connection problem found while planning; `nodes` are the nodes at fault, in order."""

    def __init__(self, message: str, nodes: list[str], field: str = "connections") -> None:
        super().__init__(message)
        self.nodes = nodes
        self.field = field


def node_type_of(agent: Mapping[str, Any]) -> str:
    """The canvas node type of an agent JSON (`metadata.node_type`; legacy agents are `Agent`)."""
    meta = agent.get("metadata") or {}
    return str(meta.get("node_type") or "Agent")


class WorkflowCompiler:
    """Compiles EchoAI workflows into LangGraph graphs whose CrewAI agents call their tools for real.

    Args:
        registry: the `ToolRegistry` agents' tools resolve through.
        executor: the `ToolExecutor` every tool call goes through.
        llm: a model (CrewAI LLM) or spec (`"openai/gpt-4o-mini"`, `"rehearsal"`) for every agent; None
            resolves each agent's own config, then `ECHO_LLM`, then the offline rehearsal model.
        missing_agents: `"error"` (default) raises naming the workflow's agents that are not given;
            `"passthrough"` compiles them as nodes that only record that they ran.
        checkpointer: LangGraph checkpointer; default a new `MemorySaver` per compiled graph.
        state_keys: input keys to declare in the state class besides the workflow's own (a run's payload
            keys); the variables of Conditional branches are always declared.
    """

    def __init__(
        self,
        registry: Any,
        executor: Any,
        llm: Any = None,
        *,
        missing_agents: str = "error",
        checkpointer: Any = None,
        state_keys: Iterable[str] = (),
    ) -> None:
        if missing_agents not in MISSING_AGENT_MODES:
            raise ValueError(f"missing_agents must be 'error' or 'passthrough', got {missing_agents!r}")
        self.registry = registry
        self.executor = executor
        self.adapter = CrewAIAdapter(registry, executor, llm)
        self.missing_agents = missing_agents
        self.checkpointer = checkpointer
        self.state_keys = tuple(state_keys)

    @property
    def models(self) -> dict[str, Any]:
        """The model of every agent compiled so far (agent id -> CrewAI LLM)."""
        return dict(self.adapter.models)

    @property
    def uses_rehearsal(self) -> bool:
        """True when some agent compiled so far runs on the offline rehearsal model."""
        return bool(self.adapter.rehearsal_agents)

    def compile(self, workflow: Mapping[str, Any], agents: Mapping[str, Any] | list[Any]) -> Any:
        """Build and compile the graph.

        Args:
            workflow: EchoAI's workflow JSON (`agents`, `connections`, `execution_model`, `state_schema`, ...).
            agents: agent JSONs, as EchoAI's agent registry gives them (id -> agent) or a list.

        Raises:
            WorkflowCompileError: missing agents, connections to unknown nodes, cycles, bad conditions.
            ToolNotFoundError: an agent names a tool the registry does not have.
        """
        from langgraph.checkpoint.memory import MemorySaver
        from langgraph.graph import END, START, StateGraph

        agent_map = _agent_map(agents)
        topo = self._topology(workflow, agent_map)
        variables = [
            name
            for targets in topo.conditionals.values()
            for condition, _ in targets
            for name in condition_variables(condition)
        ]
        state_class = build_state_schema(workflow, agent_map, extra_keys=[*variables, *self.state_keys])
        graph: Any = StateGraph(state_class)
        for node_id in topo.order:
            agent = agent_map.get(node_id) or {"agent_id": node_id, "name": node_id, "metadata": {}}
            graph.add_node(node_id, _announced(node_id, agent, self._node(node_id, agent, topo, agent_map)))
        for entry in topo.entries:
            graph.add_edge(START, entry)
        for node_id in topo.order:
            route = topo.routes.get(node_id)
            if route is not None:
                route_fn, path_map = route
                graph.add_conditional_edges(node_id, route_fn, path_map)
            elif not topo.successors[node_id]:
                graph.add_edge(node_id, END)
        for target, preds in topo.joins.items():
            if len(preds) > 1:
                graph.add_edge(list(preds), target)  # waits for every predecessor (parallel join)
            else:
                graph.add_edge(preds[0], target)
        for source, target in topo.plain_edges:
            graph.add_edge(source, target)
        return graph.compile(checkpointer=self.checkpointer or MemorySaver())

    # -- planning ------------------------------------------------------------------------------------

    def _topology(self, workflow: Mapping[str, Any], agent_map: dict[str, dict[str, Any]]) -> Topology:
        ids = [str(a) for a in workflow.get("agents") or []]
        missing = [i for i in ids if i not in agent_map]
        if missing and self.missing_agents == "error":
            raise WorkflowCompileError(
                f"Workflow {workflow.get('workflow_id')!r} names {len(missing)} agent(s) that were not given: "
                f"{', '.join(missing)}; pass them, or compile with missing_agents='passthrough'"
            )
        types = {i: node_type_of(agent_map[i]) if i in agent_map else "Missing" for i in ids}
        try:
            topo = Topology.build(workflow, ids, types)
        except _TopologyError as exc:
            message = str(exc)
            if exc.field == "connections.cycle":
                path = " -> ".join(_node_label(n, agent_map) for n in [*exc.nodes, exc.nodes[0]])
                message = f"the connections form a cycle: {path}; loops are not supported, remove one of them"
            raise WorkflowCompileError(
                message, node_id=exc.nodes[0] if exc.nodes else None, field="connections"
            ) from exc
        except ValueError as exc:
            raise WorkflowCompileError(str(exc)) from exc
        for node_id in topo.order:
            kind = topo.types.get(node_id)
            if kind == "Conditional" and node_id in agent_map:
                targets = branch_targets(agent_map[node_id], topo, agent_map)
                for condition, _ in targets:
                    try:
                        parse_condition(condition) if condition.strip() else None
                    except ConditionError as exc:
                        raise WorkflowCompileError(
                            f"Conditional node {_node_label(node_id, agent_map)}: {exc}",
                            node_id=node_id,
                            field="branches",
                        ) from exc
                topo.add_conditional(node_id, targets)
            elif kind == "HITL":
                topo.add_hitl(node_id)
        topo.finish()
        return topo

    def _node(
        self, node_id: str, agent: dict[str, Any], topo: Topology, agent_map: Mapping[str, dict[str, Any]]
    ) -> Callable[[dict[str, Any]], Any]:
        kind = topo.types.get(node_id, "Agent")
        if kind == "Missing":
            return nodes.passthrough_node(agent, "agent missing from the workflow's agent set")
        if node_id in topo.hierarchies:
            workers = [agent_map.get(w) or {"agent_id": w, "name": w} for w in topo.hierarchies[node_id]]
            for worker in workers:
                self.adapter.factory.resolve_tools(worker)  # unknown tools fail at compile time
            return self.adapter.create_hierarchical_crew_node(agent, workers, node_id=node_id)
        if kind == "Start":
            return nodes.start_node(agent)
        if kind == "End":
            return nodes.end_node(agent)
        if kind == "Merge":
            return nodes.merge_node(agent)
        if kind in TOOL_TYPES:
            return nodes.tool_node(self.adapter, agent, node_id, branch=node_id in topo.branch_nodes)
        if kind == "Conditional":
            return nodes.conditional_node(agent, topo.conditionals.get(node_id, []), node_id)
        if kind == "HITL":
            return nodes.hitl_node(agent, node_id)
        if kind not in AGENT_TYPES:
            logger.warning("node %s has type %r, which runs as an agent", node_id, kind)
        return self.adapter.create_sequential_agent_node(
            agent, node_id=node_id, branch=node_id in topo.branch_nodes
        )


def _agent_map(agents: Mapping[str, Any] | list[Any]) -> dict[str, dict[str, Any]]:
    items = agents.values() if isinstance(agents, Mapping) else agents
    out: dict[str, dict[str, Any]] = {}
    for agent in items:
        normal = normalize_agent(agent)
        if not normal.get("agent_id"):
            raise WorkflowCompileError(f"an agent has no agent_id: {str(agent)[:120]!r}")
        out[str(normal["agent_id"])] = normal
    return out


def _announced(node_id: str, agent: Mapping[str, Any], fn: Callable[[dict[str, Any]], Any]) -> Callable:
    """Wrap a node so it reports start and finish on LangGraph's custom stream (the runner's progress)."""
    return _AnnouncedNode(
        {"node_id": node_id, "name": agent.get("name"), "node_type": node_type_of(agent)}, fn
    )


class _AnnouncedNode:
    # A callable object rather than a closure: LangGraph disassembles closures at compile time to look
    # for subgraphs (about 1 ms per node), and an object is skipped.

    def __init__(self, info: dict[str, Any], fn: Callable[[dict[str, Any]], Any]) -> None:
        self.info = info
        self.fn = fn

    def __call__(self, state: dict[str, Any]) -> Any:
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
        writer({"type": "node.started", **self.info})
        try:
            delta = self.fn(state)
        except Exception as exc:  # boundary: reported on the stream, then the run stops as before
            if not _is_graph_signal(exc):
                writer({"type": "node.failed", **self.info, "status": "failed", "error": str(exc)})
            raise
        count = len(delta.get("tool_events") or []) if isinstance(delta, dict) else 0
        finished = {"type": "node.finished", **self.info, "tool_events": count}
        errors = _node_errors(delta)
        if errors:
            finished.update(status="failed", error="; ".join(errors))
        writer(finished)
        return delta


def _is_graph_signal(exc: BaseException) -> bool:
    # LangGraph's interrupt travels as an exception (GraphInterrupt); it is a pause, not a failure.
    from langgraph.errors import GraphBubbleUp

    return isinstance(exc, GraphBubbleUp)


def _node_errors(delta: Any) -> list[str]:
    """The errors a node recorded in its own messages (a failed tool call, a failed fan-out arm)."""
    if not isinstance(delta, dict):
        return []
    messages = delta.get("messages") or []
    errors: list[str] = []
    for message in messages:
        if not isinstance(message, Mapping):
            continue
        if message.get("status") == "failed":
            errors.append(str(message.get("error") or "failed"))
        failed = message.get("failed")  # a parallel crew: agent id -> error
        if isinstance(failed, Mapping):
            errors.extend(str(e) for e in failed.values())
    return errors


# -- topology --------------------------------------------------------------------------------------------

END_NODE = "__end__"


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

    @property
    def entries(self) -> list[str]:
        return [n for n in self.order if not self.predecessors[n]]

    @classmethod
    def build(cls, workflow: Mapping[str, Any], ids: list[str], types: dict[str, str]) -> Topology:
        """Plan from `workflow["connections"]`; raises `ValueError` on unknown nodes and cycles."""
        known = set(ids)
        edges: list[tuple[str, str]] = []
        for index, conn in enumerate(workflow.get("connections") or []):
            source, target = str(conn.get("from")), str(conn.get("to"))
            for end in (source, target):
                if end not in known:
                    raise _TopologyError(
                        f"connections[{index}] ({source} -> {target}) names {end!r}, which is not a workflow agent",
                        [source if end == target else target],
                    )
            if source == target:
                raise _TopologyError(
                    f"connections[{index}] connects {source!r} to itself; loops are not supported", [source]
                )
            if (source, target) not in edges:
                edges.append((source, target))
        hierarchies: dict[str, list[str]] = {}
        if str(workflow.get("execution_model") or "").lower() == "hierarchical":
            ids, edges, hierarchies = _collapse_hierarchy(workflow, ids, types, edges)
        successors: dict[str, list[str]] = {i: [] for i in ids}
        predecessors: dict[str, list[str]] = {i: [] for i in ids}
        for source, target in edges:
            successors[source].append(target)
            predecessors[target].append(source)
        order = _topological(ids, successors, predecessors)
        if not order:
            raise ValueError(f"workflow {workflow.get('workflow_id')!r} has no agents")
        return cls(order, types, successors, predecessors, hierarchies)

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
            direct = [s for s in self.successors[node] if s not in self.joins]
            return direct or END_NODE

        self.routes[node] = (route, [*self.successors[node], END_NODE])

    def finish(self) -> None:
        """Decide joins (wait for all) versus plain edges, and mark fan-out branches."""
        for target in self.order:
            preds = [p for p in self.predecessors[target] if p not in self.conditionals]
            if len(preds) > 1 and not self._exclusive(preds):
                self.joins[target] = preds
            else:
                self.plain_edges.extend((p, target) for p in preds if p not in self.routes)
        for node in self.order:
            if len(self.successors[node]) > 1 and node not in self.conditionals:
                self.branch_nodes.update(self.successors[node])

    def _exclusive(self, preds: list[str]) -> bool:
        # Alternatives of a Conditional never all finish: a join would wait forever.
        for targets in self.conditionals.values():
            reach = [self._reach(t) for _, t in targets if t]
            arms = [{i for i, r in enumerate(reach) if p in r} for p in preds]
            arms = [a for a in arms if a]
            if any(a.isdisjoint(b) for i, a in enumerate(arms) for b in arms[i + 1 :]):
                return True
        return False

    def _reach(self, start: str) -> set[str]:
        seen, stack = set(), [start]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(self.successors.get(node, []))
        return seen


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
    if len(order) < len(ids):
        stuck = [n for n in ids if n not in order]
        cycle = _cycle(stuck, predecessors)
        raise _TopologyError(
            f"the connections form a cycle: {' -> '.join([*cycle, cycle[0]])}; loops are not supported",
            cycle,
            field="connections.cycle",
        )
    return order


def _cycle(stuck: list[str], predecessors: dict[str, list[str]]) -> list[str]:
    """One cycle among the nodes a topological sort could not place, in connection order.

    Every such node waits for a predecessor that is also stuck, so walking back from any of them
    reaches a node seen before: the walk from there is a cycle.
    """
    waiting = set(stuck)
    walk: list[str] = []
    node = stuck[0]
    while node not in walk:
        walk.append(node)
        node = next(p for p in predecessors[node] if p in waiting)
    loop = walk[walk.index(node) :]
    loop.reverse()
    first = min(range(len(loop)), key=lambda i: stuck.index(loop[i]))  # start where the workflow lists it
    return loop[first:] + loop[:first]


def _node_label(node_id: str, agent_map: Mapping[str, Mapping[str, Any]]) -> str:
    name = (agent_map.get(node_id) or {}).get("name")
    return f"{name!r} ({node_id})" if name and name != node_id else repr(node_id)


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
