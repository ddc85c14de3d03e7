"""CrewAIAdapter: LangGraph nodes that run CrewAI agents with their tools bound, returning EchoAI's state delta.

Each node builds its crew when it runs (the run's ids go into every tool call), writes the task text as
EchoAI does (ORIGINAL USER REQUEST / YOUR INSTRUCTIONS / PREVIOUS AGENT OUTPUT / ...), and returns the
same keys EchoAI's nodes return, plus the executor events of its own tool calls under `tool_events`.
"""

from __future__ import annotations

import contextvars
import json
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from echo_tools.events import ToolEvent
from echo_tools.mcp.callbacks import ElicitationInterrupted, graph_pauses, sampling_llm
from echo_tools.models import ToolContext
from workflow_bridge.agent_factory import AgentFactory, agent_label, persona
from workflow_bridge.llm import describe_llm, is_rehearsal, llm_from_spec, llm_params, resolve_llm
from workflow_bridge.node_deadline import NodeTimeoutError, bounded_timeout_ms, deadline_in, run_bounded
from workflow_bridge.run_scope import scoped_context

END_ROLES = ("Workflow exit point", "Output")
FAILED_MARK = "[failed]"
Node = Callable[[dict[str, Any]], dict[str, Any]]


class AgentNodeError(RuntimeError):
    """A CrewAI agent node that failed (model or framework error); `events` are its tool events so far."""

    def __init__(self, message: str, events: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.events = list(events or [])


def failed_output(error: str, error_type: str | None = None) -> str:
    """What a failed branch leaves in `parallel_output` / `individual_outputs`: its error, marked, so the
    join and the next agent see that the branch ran and failed (`[failed] execution: ...`)."""
    kind = f" {error_type}:" if error_type else ""
    return f"{FAILED_MARK}{kind} {error}"


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class ToolEventCapture:
    """One sink per executor that hands each event to the node (run id, node id) that caused it."""

    _by_executor: weakref.WeakKeyDictionary[Any, ToolEventCapture] = weakref.WeakKeyDictionary()
    _guard = threading.Lock()

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._buckets: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}

    @classmethod
    def of(cls, executor: Any) -> ToolEventCapture:
        with cls._guard:
            capture = cls._by_executor.get(executor)
            if capture is None:
                capture = cls._by_executor[executor] = cls()
                executor.add_sink(capture, inline=True)  # cheap, and needed before the node returns
            return capture

    def __call__(self, event: ToolEvent) -> None:
        with self._lock:
            key = (event.run_id, event.node_id)
            bucket = self._buckets.get(key)
            if bucket is not None:
                bucket.append(event.to_dict())  # with `agent_name` from the agent's context

    def open(self, run_id: str | None, node_id: str | None) -> None:
        """Start collecting the events of one node run."""
        with self._lock:
            self._buckets.setdefault((run_id, node_id), [])

    def close(self, run_id: str | None, node_id: str | None) -> list[dict[str, Any]]:
        with self._lock:
            return self._buckets.pop((run_id, node_id), [])


def original_request(state: Mapping[str, Any]) -> str:
    """EchoAI's choice of the user's request (§2.8)."""
    for key in ("original_user_input", "user_input", "message", "task_description", "question", "input"):
        value = state.get(key)
        if value:
            return value if isinstance(value, str) else json.dumps(value, default=str)
    return ""


def format_parallel(value: Any) -> str:
    """`parallel_output` as text: one `name: output` block per branch."""
    if isinstance(value, Mapping):
        return "\n\n".join(f"[{k}]\n{v}" for k, v in value.items())
    return "" if value is None else str(value)


def failed_branch_delta(
    agent: Mapping[str, Any], node_id: str, error: str, error_type: str | None, events: list[dict[str, Any]]
) -> dict[str, Any]:
    """The delta of a fan-out arm that failed: its error under its name in `parallel_output` and
    `individual_outputs` (marked `[failed]`), a failed message, its tool events; `crew_result` untouched."""
    marked = failed_output(error, error_type)
    return {
        "parallel_output": {str(agent.get("name") or node_id): marked},
        "individual_outputs": {node_id: marked},
        "tool_events": events,
        "messages": [
            {
                "agent": agent.get("agent_id"),
                "name": agent.get("name"),
                "role": agent.get("role"),
                "status": "failed",
                "error": error,
                "error_type": error_type,
                "timestamp": now(),
            }
        ],
    }


def task_text(agent: Mapping[str, Any], state: Mapping[str, Any], tool_names: list[str]) -> str:
    """The task description EchoAI gives an agent, with the same section headers."""
    parts = [f"ORIGINAL USER REQUEST:\n{original_request(state)}"]
    if agent.get("prompt"):
        parts.append(f"YOUR INSTRUCTIONS:\n{agent['prompt']}")
    if state.get("crew_result"):
        parts.append(f"PREVIOUS AGENT OUTPUT:\n{state['crew_result']}")
    if state.get("parallel_output"):
        parts.append(f"PARALLEL EXECUTION RESULTS:\n{format_parallel(state['parallel_output'])}")
    inputs = {k: state.get(k) for k in agent.get("input_schema") or [] if state.get(k) is not None}
    if inputs:
        parts.append(f"INPUT DATA:\n{json.dumps(inputs, indent=2, default=str)}")
    if state.get("review_feedback"):  # a Self-Review sent this node round again
        parts.append(
            f"REVIEW FEEDBACK (improve your previous output accordingly):\n{state['review_feedback']}"
        )
    role, goal, _ = persona(agent)
    parts.append(f"YOUR ROLE:\n{role}")
    if agent.get("goal"):
        parts.append(f"YOUR GOAL:\n{goal}")
    if tool_names:
        parts.append(
            f"AVAILABLE TOOLS:\n{', '.join(tool_names)}\n"
            "IMPORTANT: Use your available tools to complete this task, and base your answer on what they return."
        )
    return "\n\n".join(parts)


def agent_delta(
    agent: Mapping[str, Any], state: Mapping[str, Any], text: str, **extra: Any
) -> dict[str, Any]:
    """EchoAI's state delta of an agent node: crew_result, output keys, result for End-like roles."""
    output_keys = [k for k in agent.get("output_schema") or [] if isinstance(k, str)]
    delta: dict[str, Any] = {k: text for k in output_keys}
    delta["crew_result"] = text
    delta["original_user_input"] = original_request(state)
    if "result" in output_keys or agent.get("role") in END_ROLES:
        delta["result"] = text
    delta.update(extra)
    return delta


def node_context(agent: Mapping[str, Any], state: Mapping[str, Any], node_id: str) -> ToolContext:
    """The context of a node's tool calls: the run's ids, a composite caller's grants, deadline and depth
    (`run_scope.scoped_context`, narrowed by the agent's own `permissions`), and the node's deadline (an
    agent's timeout, a Failsafe's) as the calls' timeout."""
    ctx = scoped_context(
        agent,
        ToolContext(
            agent_id=agent.get("agent_id"),
            agent_name=agent_name(agent),
            workflow_id=state.get("workflow_id"),
            run_id=state.get("run_id"),
            node_id=node_id,
        ),
    )
    timeout_ms = bounded_timeout_ms(ctx.timeout_ms)
    return ctx if timeout_ms == ctx.timeout_ms else ctx.model_copy(update={"timeout_ms": timeout_ms})


def agent_timeout_s(agent: Mapping[str, Any]) -> float | None:
    """An agent's `constraints.timeout_seconds` (a positive number), else None."""
    constraints = agent.get("constraints")
    value = constraints.get("timeout_seconds") if isinstance(constraints, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


class CrewAIAdapter:
    """Builds the LangGraph nodes that run CrewAI agents.

    Args:
        registry: the `ToolRegistry`.
        executor: the `ToolExecutor` every tool call goes through.
        llm: a model (or spec) for every agent; None resolves each agent's own (`llm.resolve_llm`).
    """

    def __init__(self, registry: Any, executor: Any, llm: Any = None) -> None:
        self.registry = registry
        self.executor = executor
        self.llm = llm
        self.factory = AgentFactory(registry, executor)
        self.capture = ToolEventCapture.of(executor)
        self.rehearsal_agents: list[str] = []
        self.models: dict[str, Any] = {}  # agent id -> the model it runs with

    def llm_for(self, agent: Mapping[str, Any]) -> Any:
        """The model of one agent: the adapter's `llm` (an object, or a spec built with the agent's
        temperature and max_tokens) overrides everything; else `resolve_llm` (agent config, ECHO_LLM,
        rehearsal)."""
        if isinstance(self.llm, str):
            llm = llm_from_spec(self.llm, **llm_params(agent.get("llm")))
        elif self.llm is not None:
            llm = self.llm
        else:
            llm = resolve_llm(agent.get("llm"))
        if is_rehearsal(llm):
            self.rehearsal_agents.append(str(agent.get("agent_id")))
        self.models[str(agent.get("agent_id"))] = llm
        return llm

    def context(self, agent: Mapping[str, Any], state: Mapping[str, Any], node_id: str) -> ToolContext:
        """See `node_context`."""
        return node_context(agent, state, node_id)

    def run_agent(
        self, agent: Mapping[str, Any], state: Mapping[str, Any], node_id: str, llm: Any = None
    ) -> tuple[str, list[str], list[dict[str, Any]], str]:
        """Run one agent's crew; returns (output text, tool names, tool events, model name)."""
        from crewai import Crew, Process, Task

        with deadline_in(agent_timeout_s(agent)):  # the agent's tool calls get no more than its timeout
            ctx = self.context(agent, state, node_id)
        tools = self.factory.bind_tools(agent, ctx)
        llm = llm if llm is not None else self.llm_for(agent)
        names = [t.name for t in tools]
        crew_agent = self.factory.create_agent(agent, context=ctx, llm=llm, tools=tools)
        task = Task(
            description=task_text(agent, state, names),
            expected_output=agent.get("expected_output") or "A complete, accurate answer to the task.",
            agent=crew_agent,
        )
        self.capture.open(ctx.run_id, node_id)
        with graph_pauses():  # an MCP server's elicitation pauses the run (LangGraph interrupt)
            try:
                crew = Crew(agents=[crew_agent], tasks=[task], process=Process.sequential, verbose=False)
                with sampling_llm(llm):  # an MCP server's sampling request during a tool call asks this model
                    # constraints.timeout_seconds (and a Failsafe's timeout) bound the whole crew
                    output = run_bounded(
                        without_kickoff_log(crew).kickoff,
                        agent_timeout_s(agent),
                        f"CrewAI agent node {agent_label(agent)}",
                    )
            except ElicitationInterrupted:
                self.capture.close(ctx.run_id, node_id)
                raise
            except NodeTimeoutError as exc:
                events = self.capture.close(ctx.run_id, node_id)
                raise AgentNodeError(
                    f"{exc} (constraints.timeout_seconds or a Failsafe's timeout)", events
                ) from exc
            except Exception as exc:  # boundary: a model or framework failure stops this node, named
                events = self.capture.close(ctx.run_id, node_id)
                raise AgentNodeError(
                    f"CrewAI agent node {agent_label(agent)} failed (model {describe_llm(llm)}): {exc}",
                    events,
                ) from exc
        events = self.capture.close(ctx.run_id, node_id)
        return str(getattr(output, "raw", output)), names, events, str(getattr(llm, "model", llm))

    def create_sequential_agent_node(
        self, agent_config: Mapping[str, Any], *, node_id: str | None = None, branch: bool = False
    ) -> Node:
        """A node running one CrewAI agent; returns EchoAI's delta (plus `tool_events`).

        Args:
            agent_config: the agent JSON.
            node_id: the graph node name (default: the agent id).
            branch: the node is one branch of a fan-out; it also writes `parallel_output` and
                `individual_outputs` (merged by reducers) for the join.
        """
        agent = dict(agent_config)
        node = node_id or str(agent.get("agent_id"))
        self.factory.resolve_tools(agent)  # unknown tools fail now, at compile time, not mid-run
        llm = self.llm_for(agent)

        def sequential_agent_node(state: dict[str, Any]) -> dict[str, Any]:
            if branch:
                try:
                    text, names, events, model = self.run_agent(agent, state, node, llm)
                except AgentNodeError as exc:
                    # one failed arm of a fan-out must not erase the others: it is kept, marked failed
                    return failed_branch_delta(agent, node, str(exc), "execution", exc.events)
            else:
                text, names, events, model = self.run_agent(agent, state, node, llm)
            message = {
                "agent": agent.get("agent_id"),
                "name": agent.get("name"),
                "role": agent.get("role"),
                "tools_bound": len(names),
                "tool_names": names,
                "original_request": original_request(state),
                "had_previous_context": bool(state.get("crew_result")),
                "had_parallel_context": bool(state.get("parallel_output")),
                "output_preview": text[:500],
                "llm": model,
                "timestamp": now(),
            }
            extra: dict[str, Any] = {"messages": [message], "tool_events": events}
            if branch:
                extra["parallel_output"] = {str(agent.get("name") or node): text}
                extra["individual_outputs"] = {node: text}
            return agent_delta(agent, state, text, **extra)

        sequential_agent_node.__name__ = f"agent_{node}"
        return sequential_agent_node

    def create_parallel_crew_node(
        self,
        agent_configs: list[Mapping[str, Any]],
        *,
        node_id: str = "parallel_crew",
        aggregation: str = "combine",
    ) -> Node:
        """One node running several agents concurrently (EchoAI's parallel crew, really parallel)."""
        agents = [dict(a) for a in agent_configs]
        llms = [self.llm_for(a) for a in agents]

        def run(pair: tuple[dict[str, Any], Any], state: dict[str, Any]) -> tuple[str, list, str | None]:
            """(output text, tool events, error or None) of one agent."""
            agent, llm = pair
            try:
                text, _, events, _ = self.run_agent(agent, state, f"{node_id}:{agent.get('agent_id')}", llm)
            except AgentNodeError as exc:  # kept in the results, marked failed
                return failed_output(str(exc), "execution"), exc.events, str(exc)
            return text, events, None

        def parallel_crew_node(state: dict[str, Any]) -> dict[str, Any]:
            # each agent's thread gets a copy of this node's context: the run's scope is in it
            pairs = list(zip(agents, llms, strict=True))
            contexts = [contextvars.copy_context() for _ in pairs]
            with ThreadPoolExecutor(max_workers=max(1, len(agents))) as pool:
                runs = list(pool.map(lambda c, pair: c.run(run, pair, state), contexts, pairs))
            individual = {str(a.get("agent_id")): run[0] for a, run in zip(agents, runs, strict=True)}
            named = {
                str(a.get("name") or a.get("agent_id")): run[0] for a, run in zip(agents, runs, strict=True)
            }
            combined = (
                format_parallel(named) if aggregation != "prioritize" else next(iter(named.values()), "")
            )
            return {
                "parallel_output": combined,
                "individual_outputs": individual,
                "crew_result": combined,
                "original_user_input": original_request(state),
                "messages": [
                    {
                        "node": "parallel_crew",
                        "agents": list(individual),
                        "original_request": original_request(state),
                        "result_count": len(runs),
                        "failed": {
                            str(a.get("agent_id")): run[2]
                            for a, run in zip(agents, runs, strict=True)
                            if run[2] is not None
                        },
                        "aggregation_strategy": aggregation,
                        "timestamp": now(),
                    }
                ],
                "tool_events": [e for run in runs for e in run[1]],
            }

        return parallel_crew_node

    def create_hierarchical_crew_node(
        self,
        master_config: Mapping[str, Any],
        worker_configs: Sequence[Mapping[str, Any]],
        *,
        node_id: str | None = None,
    ) -> Node:
        """A CrewAI hierarchical crew: a manager (`manager_llm`, the master's model) delegating to workers.

        The master is not put among the agents (EchoAI did, and CrewAI then built a second manager and
        made the master a worker); its prompt and goal shape the manager's task.
        """
        master = dict(master_config)
        workers = [dict(w) for w in worker_configs]
        node = node_id or str(master.get("agent_id"))
        worker_llms = [self.llm_for(w) for w in workers]
        manager_llm = self.llm_for(master)

        def hierarchical_crew_node(state: dict[str, Any]) -> dict[str, Any]:
            from crewai import Crew, Process, Task

            run_id = state.get("run_id")
            crew_agents: list[Any] = []
            names: list[str] = []
            roles = _unique_roles(workers)
            for worker, role, llm in zip(workers, roles, worker_llms, strict=True):
                ctx = self.context(worker, state, node)
                tools = self.factory.bind_tools(worker, ctx)
                names.extend(t.name for t in tools)
                crew_agents.append(
                    self.factory.create_agent(worker, context=ctx, llm=llm, tools=tools, role=role)
                )
            task = Task(
                description=task_text(master, state, []) + "\n\nCOWORKERS:\n" + ", ".join(roles),
                expected_output=master.get("expected_output")
                or "A complete answer built from the coworkers' work.",
            )
            self.capture.open(run_id, node)
            try:
                crew = Crew(
                    agents=crew_agents,
                    tasks=[task],
                    process=Process.hierarchical,
                    manager_llm=manager_llm,
                    verbose=False,
                )
                output = without_kickoff_log(crew).kickoff()
                text = str(getattr(output, "raw", output))
            except Exception as exc:  # boundary: a model or framework failure stops this node, named
                raise AgentNodeError(
                    f"CrewAI hierarchical node {agent_label(master)} failed "
                    f"(manager model {describe_llm(manager_llm)}): {exc}"
                ) from exc
            finally:
                events = self.capture.close(run_id, node)
            message = {
                "node": "hierarchical_crew",
                "manager": master.get("agent_id"),
                "workers": [w.get("agent_id") for w in workers],
                "tool_names": names,
                "original_request": original_request(state),
                "output_preview": text[:500],
                "timestamp": now(),
            }
            return {
                "hierarchical_output": text,
                "crew_result": text,
                "original_user_input": original_request(state),
                "messages": [message],
                "tool_events": events,
            }

        return hierarchical_crew_node


class _NoKickoffLog:
    """Stands in for CrewAI's task-output store: CrewAI writes every task output of every kickoff to a
    SQLite file in the user's data folder (for `crew.replay`) under a cross-process lock. A workflow's
    record is LangGraph's checkpointer and the tool events instead."""

    def update(self, task_index: int, log: dict[str, Any]) -> None:
        return None

    def add(self, *args: Any, **kwargs: Any) -> None:
        return None

    def reset(self) -> None:
        return None

    def load(self) -> None:
        return None


def without_kickoff_log(crew: Any) -> Any:
    """`crew` with CrewAI's per-kickoff SQLite task log switched off (a private attribute: when a CrewAI
    version lacks it, the crew is returned unchanged)."""
    from workflow_bridge.compat.crewai import replace_task_output_handler

    replace_task_output_handler(crew, _NoKickoffLog())
    return crew


def agent_name(agent: Mapping[str, Any]) -> str | None:
    """The agent's canvas name for its tool calls' context (events show it where an id says nothing)."""
    name = agent.get("name")
    return str(name) if name else None


def _unique_roles(agents: list[dict[str, Any]]) -> list[str]:
    # CrewAI's manager delegates by role; EchoAI gives every agent the role "Autonomous AI agent".
    roles: list[str] = []
    for agent in agents:
        base = str(agent.get("name") or agent.get("role") or "Worker").replace(",", " ")
        role, n = base, 2
        while role in roles:
            role, n = f"{base} {n}", n + 1
        roles.append(role)
    return roles
