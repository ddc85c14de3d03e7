"""EchoAI's own services, answered by echo-tools: its `workflow.executor` (runs recorded in the run
history, so a run paused at a HITL node can be resumed from any process), its HITL manager (in
`echoai_hitl`) and its `workflow.node_mapper` (canvas <-> workflow JSON, both ways).

`workflow_bridge.echoai.install` puts them in EchoAI's container when EchoAI's own are registered; each keeps
the method names, arguments and answer shapes EchoAI's routes use, so the routes stay as they are.
"""

from __future__ import annotations

import concurrent.futures
import contextvars
import json
import re
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from echo_tools.runtime import loop_running
from workflow_bridge import runner

_T = TypeVar("_T")
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="echoai-run")


def off_the_loop(work: Callable[[], _T]) -> _T:
    """Run `work` here, or in a worker thread when this thread runs an event loop: EchoAI's `async def`
    routes call its services directly, and a run's code (CrewAI, tools) must not find the route's loop
    running in its thread (`asyncio.run` and sync-over-async calls fail there)."""
    if not loop_running():
        return work()
    # with the request's context variables: the scope (its end user) of the route that asked
    return _pool.submit(contextvars.copy_context().run, work).result()


class EchoAIWorkflowExecutor:
    """EchoAI's `workflow.executor`: `execute_workflow(workflow_id, execution_mode, version, input_payload)`
    loads the workflow and its agents with EchoAI's own executor and runs them with `run_workflow`, recorded
    in `history`. The answer has EchoAI's shape; a run paused at a HITL node has `status: "interrupted"`
    and the request under `hitl`.

    Args:
        host: EchoAI's `WorkflowExecutor` (its `load_for_execution` and `agent_registry` are used).
        layer: the `ToolLayer` (registry, executor, history, llm).
    """

    def __init__(self, host: Any, layer: Any) -> None:
        self.host = host
        self.layer = layer
        self.storage = getattr(host, "storage", None)
        self.agent_registry = getattr(host, "agent_registry", None)
        self.compiler = layer.compiler

    def load_for_execution(self, workflow_id: str, mode: str, version: str | None = None) -> Any:
        """EchoAI's loader, unchanged."""
        return self.host.load_for_execution(workflow_id, mode, version)

    def _agents(self, workflow: Mapping[str, Any]) -> dict[str, Any]:
        agents: dict[str, Any] = {}
        registry = self.agent_registry
        folder = getattr(registry, "storage_dir", None)
        for agent_id in workflow.get("agents") or []:
            agent = registry.get_agent(agent_id) if registry is not None else None
            if agent is None and folder is not None and _SAFE_ID.fullmatch(str(agent_id)):
                # EchoAI keeps two agent-registry caches: one saved by the canvas route is on disk only
                path = Path(folder) / f"{agent_id}.json"
                if path.is_file():
                    agent = json.loads(path.read_text(encoding="utf-8"))
            if agent is not None:
                agents[agent_id] = agent
        return agents

    def execute_workflow(
        self,
        workflow_id: str,
        execution_mode: str,
        version: str | None = None,
        input_payload: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Run a stored workflow; EchoAI's answer: `run_id`, `workflow_id`, `status` (the run history's word:
        `completed`, `completed_with_errors`, `interrupted`, `failed`, `cancelled`), `failed_calls` (the
        failed tool calls, listed), `execution_mode`, `output` (the final state), `messages`."""
        mode = "draft" if execution_mode == "draft" else execution_mode
        try:
            workflow = self.load_for_execution(workflow_id, mode, version)
        except FileNotFoundError:
            if mode != "draft":
                raise
            workflow = self.load_for_execution(workflow_id, "test", version)  # EchoAI's temp fallback
        source = {"workflow": workflow, "agents": self._agents(workflow)}
        run_id = f"run_{uuid.uuid4().hex[:16]}"
        answer: dict[str, Any] = {
            "run_id": run_id,
            "workflow_id": workflow_id,
            "execution_mode": execution_mode,
        }

        def work() -> dict[str, Any]:
            return runner.run_workflow(
                source,
                registry=self.layer.registry,
                executor=self.layer.executor,
                llm=self.layer.llm,
                run_id=run_id,
                payload=dict(input_payload or {}),
                missing_agents=self.layer.missing_agents,
                history=self.layer.history,
            )

        try:
            final = off_the_loop(work)
        except Exception as exc:  # EchoAI's contract: a failed run is an answer, not an HTTP error
            status = recorded_status(self.layer.history, run_id) or {"status": "failed"}
            return {**answer, **status, "error": f"{type(exc).__name__}: {exc}", "output": {}}
        outcome = _outcome(final)
        _note_pause(self.layer.history, run_id, workflow_id, outcome)
        return {**answer, **outcome, **(recorded_status(self.layer.history, run_id) or {})}


def recorded_status(history: Any, run_id: str) -> dict[str, Any] | None:
    """`{"status", "failed_calls"}` as the run history records the run (None: not recorded)."""
    record = history.run(run_id)
    if record is None:
        return None
    stored = record.get("source") if isinstance(record.get("source"), Mapping) else {}
    return {"status": record["status"], "failed_calls": list(stored.get("failed_calls") or [])}


def _note_pause(history: Any, run_id: str, workflow_id: Any, outcome: Mapping[str, Any]) -> None:
    # a run without tool calls has no events, and the history lists runs by their events
    if outcome["status"] == "interrupted":
        from echo_tools.events import ToolEvent

        history.record(ToolEvent(type="run.interrupted", run_id=run_id, workflow_id=workflow_id))


def _outcome(final: Mapping[str, Any]) -> dict[str, Any]:
    state = {k: v for k, v in final.items() if k != "__interrupt__"}
    answer: dict[str, Any] = {"status": "completed", "output": state, "messages": state.get("messages", [])}
    requests = [getattr(i, "value", i) for i in final.get("__interrupt__") or []]
    if requests:
        answer["status"] = "interrupted"
        answer["hitl"] = requests[0] if len(requests) == 1 else requests
    return answer


class EchoAINodeMapper:
    """EchoAI's `workflow.node_mapper` on `workflow_bridge.NodeMapper`: the canvas save path and the
    reverse path (a reopened canvas) are each other's inverse, so a reopened canvas saves again.

    Args:
        tool_registry: where tool entries are resolved.
    """

    def __init__(self, tool_registry: Any) -> None:
        from workflow_bridge.node_mapper import NodeMapper

        self.tool_registry = tool_registry
        self.mapper = NodeMapper(tool_registry)

    def map_frontend_to_backend(
        self,
        canvas_nodes: list[dict[str, Any]],
        connections: list[dict[str, Any]],
        workflow_name: str | None = None,
        auto_generate_name: bool = True,
        execution_model: str | None = None,
        workflow_id: str | None = None,
    ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Canvas -> (workflow, agents); a canvas with an error raises ValueError naming each (400)."""
        payload: dict[str, Any] = {"canvas_nodes": canvas_nodes, "connections": connections}
        for key, value in (
            ("workflow_name", workflow_name),
            ("execution_model", execution_model),
            ("workflow_id", workflow_id),
        ):
            if value:
                payload[key] = value
        mapped = self.mapper.map_canvas(payload)
        if not mapped.ok:
            raise ValueError("; ".join(str(d) for d in mapped.errors))
        return mapped.workflow, mapped.agents

    def map_backend_to_frontend(
        self, workflow: Mapping[str, Any], agents_dict: Mapping[str, Mapping[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """(workflow, agents) -> (canvas_nodes, connections), tool ids and agent ids kept."""
        payload = self.mapper.to_canvas(workflow, agents_dict)
        return payload["canvas_nodes"], payload["connections"]
