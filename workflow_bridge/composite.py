"""The `workflow` and `agent` tool types: a stored EchoAI workflow, or one EchoAI agent, run as a tool.

`WorkflowBackend` compiles the stored workflow with `WorkflowCompiler` and runs it as EchoAI does, in a
thread of its own (CrewAI refuses to run inside a running event loop), under a sub-run id derived from the
caller's run. `AgentBackend` runs one agent definition as a one-agent CrewAI crew. Their agents' tool calls
go back through the executor with what the composite call inherits: its scope (principal, ceiling, the
request's one budget meter, end user) and its nesting (the time left, `depth + 1`, the chain of composite
tools, the parent call id); the sub-run runs under that scope (`acting_as`), and `run_scope.scoped_context`
reads it back in whatever thread LangGraph runs the node.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.backends import check_stored_ref
from echo_tools.backends.base import BackendOutput, ToolBackend
from echo_tools.errors import (
    NotStoredError,
    ToolConfigError,
    ToolError,
    ToolExecutionError,
    ToolStorageError,
)
from echo_tools.gate import CallScope, Nesting, acting_as
from echo_tools.models import ToolContext
from echo_tools.skills import check_nesting
from echo_tools.stored_tools import agent_permissions
from workflow_bridge.run_scope import scoped_context

if TYPE_CHECKING:
    from collections.abc import Sequence

    from echo_tools.executor import ToolExecutor
    from echo_tools.models import ToolDef

__all__ = ["AgentBackend", "WorkflowBackend", "scoped_context"]

_GRAPH_CACHE_SIZE = 32


def _store(executor: ToolExecutor, tool: ToolDef, kind: str) -> Any:
    store = getattr(executor.registry, kind, None)
    if store is None:
        cls = "WorkflowStore" if kind == "workflows" else "AgentStore"
        raise ToolConfigError(
            f"Tool {tool.tool_id!r} runs a stored {kind[:-1]}, but the registry has no {kind} store: "
            f"create it with ToolRegistry(..., {kind}={cls}(root))",
            tool_id=tool.tool_id,
            field=f"registry.{kind}",
        )
    return store


def _stored(tool: ToolDef, field: str, read: Callable[[], dict[str, Any]], where: str = "") -> dict[str, Any]:
    try:
        return read()
    except (NotStoredError, ToolStorageError, ValueError) as exc:
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: {field}{where}: {exc}", tool_id=tool.tool_id, field=field
        ) from exc


def _check_agent(tool: ToolDef, agent: Mapping[str, Any]) -> None:
    try:
        agent_permissions(agent)
    except ValueError as exc:
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: agent {agent.get('agent_id')!r}: {exc}",
            tool_id=tool.tool_id,
            field="permissions",
        ) from None


class _CompositeBackend(ToolBackend):
    """What both types share: the nesting checks and running a blocking crew under a sub-run id."""

    nests = True
    executor: ToolExecutor  # more than a `BackendHost`: workflows and agents compile over the whole executor

    def __init__(self, executor: ToolExecutor) -> None:
        self.executor = executor

    async def _run_under(
        self, tool: ToolDef, context: ToolContext, run: Callable[[str], dict[str, Any]], started: float
    ) -> tuple[str, dict[str, Any]]:
        """`run(sub_run_id)` on a thread of its own, its agents' tool calls inheriting from `context` (and the
        deadline of the call that began at `started`, `time.monotonic()`)."""
        sub_run = f"{context.run_id or 'run'}/{tool.tool_id}/{uuid.uuid4().hex[:12]}"
        timeout_ms = context.timeout_ms or tool.timeout_ms
        nesting = Nesting(
            parent_call_id=context.call_id,
            depth=context.depth + 1,
            call_path=(*context.call_path, tool.tool_id),
            deadline=started + timeout_ms / 1000,
            trace_id=context.trace_id,
        )
        scope = CallScope.of(context).within(run_id=sub_run, nesting=nesting)  # never wider than the call's

        def work() -> dict[str, Any]:
            with acting_as(scope):
                return run(sub_run)

        try:
            final = await _in_own_thread(work, f"echo-tools {tool.tool_id}")
        except asyncio.CancelledError:
            nesting.stopped[0] = True  # the thread cannot be killed: its next node or tool call stops it
            raise
        except ToolError:
            raise
        except Exception as exc:  # boundary: a CrewAI, LangGraph or model failure is this call's failure
            raise ToolExecutionError(f"Tool {tool.tool_id!r}: {exc}", tool_id=tool.tool_id) from exc
        return sub_run, final


async def _in_own_thread(fn: Callable[[], dict[str, Any]], name: str) -> dict[str, Any]:
    """`fn()` on a thread of its own (with the caller's context variables), awaited.

    Not the loop's default executor: a run blocks its thread until its agents' tool calls return, and
    those calls may need that executor's workers themselves (sync tools), so a few concurrent composite
    calls would starve it; nested sub-workflows would deadlock it.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[dict[str, Any]] = loop.create_future()
    context = contextvars.copy_context()

    def settle(result: dict[str, Any] | None, error: BaseException | None) -> None:
        if future.done():  # the call was cancelled (deadline): nobody waits for this run any more
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result or {})

    def target() -> None:
        try:
            outcome: tuple[dict[str, Any] | None, BaseException | None] = (context.run(fn), None)
        except BaseException as exc:  # boundary: handed to the awaiting call, whatever it is
            outcome = (None, exc)
        try:
            loop.call_soon_threadsafe(settle, *outcome)
        except RuntimeError:  # the loop is closed: the call ended long ago and nobody waits
            pass

    threading.Thread(target=target, name=name, daemon=True).start()
    return await future


def _tool_calls(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The inner tool calls a run made, from its captured executor events (finished calls only)."""
    return [
        {
            "tool_id": e.get("tool_id"),
            "agent_id": e.get("agent_id"),
            "status": "completed" if e.get("type") == "tool.completed" else "failed",
            **({"error": e["error"]} if e.get("error") else {}),
        }
        for e in events
        if e.get("type") in ("tool.completed", "tool.failed")
    ]


class WorkflowBackend(_CompositeBackend):
    """Runs `workflow` tools: `{workflow_id, version?}` from `registry.workflows`, agents from `registry.agents`.

    Input `{user_input, ...}` (the Start node's variables); output `{result, crew_result, outputs}`, where
    `outputs` holds the agents' output keys. The result's metadata names the sub-run and its inner calls.
    """

    @classmethod
    def check_config(cls, tool: ToolDef, allowed_modules: Sequence[str], egress: Any = None) -> None:
        check_stored_ref(tool)  # stored ids, never paths

    def __init__(self, executor: ToolExecutor) -> None:
        super().__init__(executor)
        self._graphs: dict[str, tuple[str, Any, Any]] = {}  # tool id -> (fingerprint, graph, checkpointer)
        self._lock = threading.Lock()

    def forget(self, tool_id: str | None = None) -> None:
        with self._lock:
            if tool_id is None:
                self._graphs.clear()
            else:
                self._graphs.pop(tool_id, None)

    def load(self, tool: ToolDef) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The stored workflow the tool runs and its agents (by id).

        Raises:
            ToolConfigError: no store configured, the workflow or an agent is not stored (the field named).
        """
        config = tool.execution_config
        workflows = _store(self.executor, tool, "workflows")
        workflow = _stored(
            tool,
            "execution_config.workflow_id",
            lambda: workflows.for_tool(config),  # a deployment: the version it names at this call
        )
        ids = [str(a) for a in workflow.get("agents") or []]
        agents: dict[str, dict[str, Any]] = {}
        if ids:
            store = _store(self.executor, tool, "agents")
            for i, agent_id in enumerate(ids):
                agents[agent_id] = _stored(
                    tool,
                    "execution_config.workflow_id",
                    functools.partial(store.get, agent_id),
                    f" (agents[{i}])",
                )
                _check_agent(tool, agents[agent_id])
        return workflow, agents

    def graph(
        self, tool: ToolDef, workflow: dict[str, Any], agents: dict[str, dict[str, Any]]
    ) -> tuple[Any, Any]:
        """The compiled graph and its checkpointer, compiled again only when the stored JSON changed."""
        from langgraph.checkpoint.memory import MemorySaver

        from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler

        fingerprint = hashlib.sha256(
            json.dumps([workflow, agents], sort_keys=True, default=str).encode()
        ).hexdigest()
        with self._lock:
            cached = self._graphs.get(tool.tool_id)
        if cached is not None and cached[0] == fingerprint:
            return cached[1], cached[2]
        saver = MemorySaver()
        try:
            graph = WorkflowCompiler(self.executor.registry, self.executor, checkpointer=saver).compile(
                workflow, agents
            )
        except (WorkflowCompileError, ToolError) as exc:
            raise ToolConfigError(
                f"Tool {tool.tool_id!r}: workflow {workflow.get('workflow_id')!r} does not compile: {exc}",
                tool_id=tool.tool_id,
                field="execution_config.workflow_id",
            ) from exc
        with self._lock:
            if len(self._graphs) >= _GRAPH_CACHE_SIZE:
                self._graphs.pop(next(iter(self._graphs)))
            self._graphs[tool.tool_id] = (fingerprint, graph, saver)
        return graph, saver

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        from workflow_bridge.state import initial_state

        started = time.monotonic()  # the executor's deadline counts from now, compiling included
        check_nesting(tool.tool_id, context)
        payload = {k: v for k, v in args.items() if k != "user_input"}
        user_input = args.get("user_input")
        found: dict[str, Any] = {}

        def run(sub_run: str) -> dict[str, Any]:
            # reading, compiling (CrewAI's first import takes seconds) and running all stay off the loop
            workflow, agents = self.load(tool)
            found.update(workflow=workflow, agents=agents)
            graph, saver = self.graph(tool, workflow, agents)
            config = {"configurable": {"thread_id": sub_run}}
            state = initial_state(user_input, workflow.get("workflow_id"), sub_run, **payload)
            try:
                return dict(graph.invoke(state, config))
            finally:
                saver.delete_thread(sub_run)  # a tool call's run is not resumable: keep no checkpoints

        sub_run, final = await self._run_under(tool, context, run, started)
        agents, workflow_id = found["agents"], found["workflow"].get("workflow_id")
        if final.get("__interrupt__"):
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r}: workflow {workflow_id!r} paused at a human-review node; a workflow "
                "run as a tool cannot wait for a reviewer (run it with `echo-tools run` instead)",
                tool_id=tool.tool_id,
            )
        keys = [k for a in agents.values() for k in a.get("output_schema") or [] if isinstance(k, str)]
        outputs = {k: final[k] for k in dict.fromkeys(keys) if k in final}
        crew_result = final.get("crew_result")
        output = {
            "result": final.get("result") if final.get("result") is not None else crew_result,
            "crew_result": crew_result,
            "outputs": outputs,
        }
        calls = _tool_calls(final.get("tool_events") or [])
        return BackendOutput(
            output=output, metadata={"run_id": sub_run, "workflow_id": workflow_id, "tool_calls": calls}
        )


class AgentBackend(_CompositeBackend):
    """Runs `agent` tools: `{agent_id}` from `registry.agents`, as one CrewAI agent with its own tools.

    Input `{task, context?}`; output `{result}`. The result's metadata names the sub-run and its inner calls.
    """

    @classmethod
    def check_config(cls, tool: ToolDef, allowed_modules: Sequence[str], egress: Any = None) -> None:
        check_stored_ref(tool)  # stored ids, never paths

    def __init__(self, executor: ToolExecutor) -> None:
        super().__init__(executor)
        self._adapter: Any = None
        self._lock = threading.Lock()

    def adapter(self) -> Any:
        from workflow_bridge.crewai_adapter import CrewAIAdapter

        with self._lock:
            if self._adapter is None:
                self._adapter = CrewAIAdapter(self.executor.registry, self.executor)
            return self._adapter

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        from workflow_bridge.llm import resolve_llm

        started = time.monotonic()
        check_nesting(tool.tool_id, context)
        agent_id = tool.execution_config["agent_id"]
        store = _store(self.executor, tool, "agents")
        task = str(args.get("task") or "")
        if args.get("context"):
            task = f"{task}\n\nCONTEXT:\n{args['context']}"

        def run(sub_run: str) -> dict[str, Any]:
            # reading the agent and building its crew (CrewAI's first import takes seconds) stay off the loop
            agent = _stored(tool, "execution_config.agent_id", functools.partial(store.get, agent_id))
            _check_agent(tool, agent)
            adapter = self.adapter()
            try:
                adapter.factory.resolve_tools(agent)
            except ToolError as exc:
                raise ToolConfigError(
                    f"Tool {tool.tool_id!r}: {exc}", tool_id=tool.tool_id, field="execution_config.agent_id"
                ) from exc
            state = {"user_input": task, "run_id": sub_run, "workflow_id": None}
            llm = resolve_llm(agent.get("llm"))
            text, _names, events, _model = adapter.run_agent(agent, state, str(agent_id), llm)
            return {"result": text, "tool_events": events}

        sub_run, final = await self._run_under(tool, context, run, started)
        return BackendOutput(
            output={"result": final["result"]},
            metadata={
                "run_id": sub_run,
                "agent_id": agent_id,
                "tool_calls": _tool_calls(final["tool_events"]),
            },
        )
