"""WorkflowCompiler: EchoAI workflow JSON + agent JSONs -> a compiled LangGraph graph with tool-bound agents.

The topology comes from the connections (EchoAI assumed canvas order): entry nodes are those without
incoming edges, nodes without outgoing edges lead to END, a node with several successors fans out (the
branches run concurrently) and a node with several predecessors waits for all of them, unless they are
alternatives of a Conditional (or a guarded node's success and failure paths). A cycle through a Loop (or
Map) node is a LangGraph cycle that the node's route bounds; any other cycle is an error (`topology.py`).
Each canvas node type gets the node that does its job (`nodes.py`, `crewai_adapter.py`, `loop_nodes.py`,
`guard_nodes.py`, `template_node.py`), its config checked first (`flow_config.py`); hierarchical
workflows collapse the master and its delegates into one CrewAI hierarchical crew. Graphs compile with a
`MemorySaver` and run as EchoAI runs them: `graph.invoke(initial_state, {"configurable": {"thread_id":
run_id}})`; a graph whose loops may need more steps than LangGraph's default recursion limit gets a
limit from their bounds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from workflow_bridge import nodes
from workflow_bridge.agent_json import normalize_agent
from workflow_bridge.conditions import ConditionError, condition_variables, parse_condition
from workflow_bridge.crewai_adapter import CrewAIAdapter
from workflow_bridge.flow_config import (
    MAX_MAP_ITEMS,
    NodeConfigError,
    declared_types,
    failsafe_config,
    loop_config,
    map_config,
    node_label,
    review_config,
)
from workflow_bridge.state import build_state_schema, state_keys
from workflow_bridge.topology import (
    AGENT_TYPES,
    END_NODE,
    Topology,
    TopologyError,
    branch_targets,
)

__all__ = [
    "END_NODE",
    "Topology",
    "WorkflowCompileError",
    "WorkflowCompiler",
    "branch_targets",
    "node_type_of",
]

logger = logging.getLogger("workflow_bridge.compiler")

TOOL_TYPES = {"API", "Code", "MCP"}
MISSING_AGENT_MODES = ("error", "passthrough")
DEFAULT_STEP_LIMIT = 10_000  # about LangGraph's default recursion limit (10007 in langgraph 1.2)
_CYCLE_HINT = (
    "nothing bounds it: put a Loop node in the cycle (the last node of its body connects back to the Loop, "
    "whose maxIterations bounds it), or remove a connection"
)


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
            WorkflowCompileError: missing agents, connections to unknown nodes, unbounded cycles, bad
                conditions, Loop / Map / Template / Failsafe / Self-Review config that cannot run.
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
        for config in topo.configs.values():  # what Loop and Map nodes read and write
            variables.extend(condition_variables(getattr(config, "condition", "") or ""))
            variables.extend(v for v in (getattr(config, "item", None), getattr(config, "array", None)) if v)
        extra = [*variables, *self.state_keys]
        state_class = build_state_schema(workflow, agent_map, extra_keys=extra)
        templates = any(t == "Template" for t in topo.types.values())
        known = state_keys(workflow, agent_map, extra) if templates else []  # what templates may read
        graph: Any = StateGraph(state_class)
        for node_id in topo.order:
            agent = agent_map.get(node_id) or {"agent_id": node_id, "name": node_id, "metadata": {}}
            node = self._wrapped(node_id, agent, topo, agent_map, known)
            graph.add_node(node_id, _announced(node_id, agent, node))
        for entry in topo.entries:
            graph.add_edge(START, entry)
        for node_id in topo.order:
            route = topo.routes.get(node_id)
            if route is not None:
                route_fn, path_map = route
                graph.add_conditional_edges(node_id, route_fn, path_map)
            elif not topo.next_of(node_id):
                graph.add_edge(node_id, END)
        for target, preds in topo.joins.items():
            if len(preds) > 1:
                graph.add_edge(list(preds), target)  # waits for every predecessor (parallel join)
            else:
                graph.add_edge(preds[0], target)
        for source, target in topo.plain_edges:
            graph.add_edge(source, target)
        for source, target in topo.back_edges:
            if source not in topo.routes:  # a routed node's route leads back itself
                graph.add_edge(source, target)  # the body's end -> its Loop (or a Map's worker -> the Map)
        compiled = graph.compile(checkpointer=self.checkpointer or MemorySaver())
        steps = _step_bound(topo)
        return compiled.with_config(recursion_limit=steps) if steps > DEFAULT_STEP_LIMIT else compiled

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
            _plan_flow(topo, workflow, agent_map)
        except TopologyError as exc:
            raise _topology_error(exc, agent_map) from exc
        except NodeConfigError as exc:
            raise WorkflowCompileError(str(exc), node_id=exc.node_id, field=exc.field) from exc
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

    def _wrapped(
        self,
        node_id: str,
        agent: dict[str, Any],
        topo: Topology,
        agent_map: Mapping[str, dict[str, Any]],
        known: list[str],
    ) -> Callable[[dict[str, Any]], Any]:
        """The node, retried and bounded when a Failsafe guards it, run per item when a Map maps it."""
        from workflow_bridge.guard_nodes import GuardedNode
        from workflow_bridge.loop_nodes import MapWorker

        fn = self._node(node_id, agent, topo, agent_map, known)
        for guard in topo.guards.values():
            if guard.guarded == node_id:
                ends = [node_id, *([guard.failure] if guard.failure else [])]
                names = {n: str(agent_map[n].get("name") or n) for n in ends if n in agent_map}
                fn = GuardedNode(fn, guard, topo.configs[guard.node], agent_map[guard.node], names)
        for map_node, plan in topo.loops.items():
            if topo.types.get(map_node) == "Map" and plan.entry == node_id:
                fn = MapWorker(map_node, fn, agent, node_id)
        return fn

    def _node(
        self,
        node_id: str,
        agent: dict[str, Any],
        topo: Topology,
        agent_map: Mapping[str, dict[str, Any]],
        known: list[str],
    ) -> Callable[[dict[str, Any]], Any]:
        from workflow_bridge import guard_nodes, loop_nodes
        from workflow_bridge.template_node import template_node

        kind = topo.types.get(node_id, "Agent")
        if kind == "Missing":
            return nodes.passthrough_node(agent, "agent missing from the workflow's agent set")
        if node_id in topo.hierarchies:
            workers = [agent_map.get(w) or {"agent_id": w, "name": w} for w in topo.hierarchies[node_id]]
            for worker in workers:
                self.adapter.factory.resolve_tools(worker)  # unknown tools fail at compile time
            return self.adapter.create_hierarchical_crew_node(agent, workers, node_id=node_id)
        simple = {"Start": nodes.start_node, "End": nodes.end_node, "Merge": nodes.merge_node}
        if kind in simple:
            return simple[kind](agent)
        if kind in TOOL_TYPES:  # the compiler's own executor runs the node's tool (no CrewAI)
            branch = node_id in topo.branch_nodes
            return nodes.tool_node(self.registry, self.executor, agent, node_id, branch=branch)
        if kind == "Conditional":
            return nodes.conditional_node(agent, topo.conditionals.get(node_id, []), node_id)
        if kind == "HITL":
            return nodes.hitl_node(agent, node_id)
        config: Any = topo.configs.get(node_id)
        if kind == "Loop":
            return loop_nodes.LoopNode(agent, node_id, config, topo.loops[node_id])
        if kind == "Map":
            return loop_nodes.MapNode(agent, node_id, config)
        if kind == "Failsafe":
            return guard_nodes.failsafe_node(agent, topo.guards[node_id])
        if kind == "Self-Review":
            llm = self.adapter.llm_for(agent)
            return guard_nodes.ReviewNode(agent, node_id, config, topo.reviews[node_id], llm)
        if kind == "Template":
            try:
                return template_node(agent, node_id, known)
            except NodeConfigError as exc:
                raise WorkflowCompileError(str(exc), node_id=exc.node_id, field=exc.field) from exc
        if kind not in AGENT_TYPES:
            logger.warning("node %s has type %r, which runs as an agent", node_id, kind)
        return self.adapter.create_sequential_agent_node(
            agent, node_id=node_id, branch=node_id in topo.branch_nodes
        )


def _plan_flow(topo: Topology, workflow: Mapping[str, Any], agent_map: Mapping[str, dict[str, Any]]) -> None:
    """Check the config of every Loop, Map, Failsafe and Self-Review node and plan its cycle and routes.

    Raises:
        NodeConfigError: a config that cannot run (the node, field and value named).
        TopologyError: connections that the node cannot work with.
    """
    from workflow_bridge.guard_nodes import guarded_route, review_route
    from workflow_bridge.loop_nodes import loop_route, map_route

    declared = declared_types(workflow, agent_map)
    kinds = {n: topo.types.get(n) for n in topo.order if n in agent_map}
    for node, kind in kinds.items():  # loops and maps first: a body without a back edge moves edges
        if kind == "Loop":
            topo.configs[node] = loop_config(agent_map[node], declared)
            topo.routes[node] = loop_route(node, topo.plan_loop(node))
        elif kind == "Map":
            topo.configs[node] = map_config(agent_map[node], declared)
            plan = topo.plan_loop(node, mapped=True)
            if plan.body != [plan.entry]:
                raise TopologyError(
                    f"the Map node runs one node on each item; its body holds {', '.join(plan.body)}: "
                    "connect the Map to one node, and that node (not a chain) back to the Map",
                    [node],
                )
            topo.routes[node] = map_route(node, plan.entry, topo.configs[node], plan.exits)
    for node, kind in kinds.items():
        if kind == "Failsafe":
            topo.configs[node] = failsafe_config(agent_map[node])
            guard = topo.plan_guard(node)
            topo.routes[guard.guarded] = guarded_route(guard, topo.next_of(guard.guarded))
        elif kind == "Self-Review":
            topo.configs[node] = review_config(agent_map[node])
            topo.routes[node] = review_route(node, topo.plan_review(node))


def _step_bound(topo: Topology) -> int:
    """How many LangGraph steps the run may need at most: each loop's iterations times its body, nested
    loops multiplied, each Map's waves, each Self-Review's rounds."""
    steps = 3 * len(topo.order) + 10
    for node, plan in topo.loops.items():
        config = topo.configs.get(node)
        if topo.types.get(node) == "Map":
            rounds = MAX_MAP_ITEMS // max(1, getattr(config, "max_concurrency", 1)) + 1
        else:
            rounds = getattr(config, "max_iterations", 1) + 1
        factor = 1
        for outer, outer_plan in topo.loops.items():
            if node in outer_plan.body and outer != node:
                factor *= getattr(topo.configs.get(outer), "max_iterations", 1) + 1
        steps += rounds * (len(plan.body) + 1) * factor
    for node in topo.reviews:
        steps += 2 * getattr(topo.configs.get(node), "max_rounds", 1)
    return steps


def _topology_error(exc: TopologyError, agent_map: Mapping[str, Mapping[str, Any]]) -> WorkflowCompileError:
    message = str(exc)
    if exc.field == "connections.cycle":
        path = " -> ".join(_node_label(n, agent_map) for n in [*exc.nodes, exc.nodes[0]])
        message = f"the connections form a cycle: {path}; {_CYCLE_HINT}"
    elif exc.nodes and exc.nodes[0] in agent_map:
        for other in agent_map:  # the other nodes named by their canvas names too
            if other != exc.nodes[0] and repr(other) in message:
                message = message.replace(repr(other), _node_label(other, agent_map))
        message = f"{node_label(agent_map[exc.nodes[0]])}: {message}"
    return WorkflowCompileError(message, node_id=exc.nodes[0] if exc.nodes else None, field="connections")


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
            # a tool node's call that ran but failed the node (a Code program exiting 1, an HTTP error)
            finished["failed_tools"] = _judged_failed(delta)
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


def _judged_failed(delta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The tool calls a node's own messages call failed, `{tool_id, error, error_type}` each."""
    return [
        {"tool_id": m.get("tool_id"), "error": str(m.get("error") or ""), "error_type": m.get("error_type")}
        for m in delta.get("messages") or []
        if isinstance(m, Mapping) and m.get("status") == "failed" and m.get("tool_id")
    ]


def _node_label(node_id: str, agent_map: Mapping[str, Mapping[str, Any]]) -> str:
    name = (agent_map.get(node_id) or {}).get("name")
    return f"{name!r} ({node_id})" if name and name != node_id else repr(node_id)
