"""EchoAI's own services, answered by echo-tools: its `workflow.executor` (runs recorded in the run
history, so a run paused at a HITL node can be resumed from any process), its HITL manager (approve,
reject and edit resume the paused run) and its `workflow.node_mapper` (canvas <-> workflow JSON, both ways).

`workflow_bridge.echoai.install` puts them in EchoAI's container when EchoAI's own are registered; each keeps
the method names, arguments and answer shapes EchoAI's routes use, so the routes stay as they are.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from workflow_bridge import runner

_T = TypeVar("_T")
_SAFE_ID = re.compile(r"[A-Za-z0-9_-]{1,200}")
# `changes` keys that mean EchoAI's other `modify`: an edit of the agent's configuration, not of its result
AGENT_CONFIG_KEYS = ("agent_id", "llm", "prompt", "model", "role", "goal", "tools", "system_prompt")
DEFERRED = "hitl.deferred"  # the history event a deferral is kept as
_HITL_MARKS = (DEFERRED, "run.resumed", "run.interrupted")
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="echoai-run")


def off_the_loop(work: Callable[[], _T]) -> _T:
    """Run `work` here, or in a worker thread when this thread runs an event loop: EchoAI's `async def`
    routes call its services directly, and a run's code (CrewAI, tools) must not find the route's loop
    running in its thread (`asyncio.run` and sync-over-async calls fail there)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    return _pool.submit(work).result()


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
        """Run a stored workflow; EchoAI's answer: `run_id`, `workflow_id`, `status` (`completed`,
        `interrupted`, `failed`), `execution_mode`, `output` (the final state), `messages`."""
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
            return {**answer, "status": "failed", "error": f"{type(exc).__name__}: {exc}", "output": {}}
        outcome = _outcome(final)
        _note_pause(self.layer.history, run_id, workflow_id, outcome)
        return {**answer, **outcome}


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


class HitlRequestError(ValueError):
    """A HITL request EchoAI's routes answer with 400 (they map ValueError): `field` names what is wrong."""

    def __init__(self, message: str, *, field: str, value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.value = value


class EchoAIHitl:
    """EchoAI's `HITLManager`, answered from the run history: `approve`, `reject` and `modify` resume the
    paused run (`runner.resume_run`) and answer EchoAI's shape plus the resumed run's `run_status` and
    `output`. `modify`'s `changes` are the edit: `edited_output` / `crew_result` as given, else the whole
    object replaces the paused result; agent-config changes (`llm`, `prompt`, ...) are refused. `defer`
    keeps the run paused and marks it `deferred` (until `defer_until`, if given) with who and why.
    Errors (unknown run, not paused, a bad decision) are ValueErrors naming the field: EchoAI's routes
    answer them with 400.

    Args:
        layer: the `ToolLayer` whose history recorded the runs.
    """

    def __init__(self, layer: Any) -> None:
        self.layer = layer

    def __call__(self, *_args: Any, **_kwargs: Any) -> EchoAIHitl:
        return self  # EchoAI's routes call `HITLManager()`: the class is replaced by this object

    def _resume(self, run_id: str, action: str, decision: dict[str, Any], actor: str) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            return runner.resume_run(
                run_id,
                decision,
                storage=self.layer.history,
                registry=self.layer.registry,
                executor=self.layer.executor,
                llm=self.layer.llm,
            )

        try:
            final = off_the_loop(work)
        except runner.RunResumeError as exc:  # EchoAI's routes answer a ValueError with 400
            raise HitlRequestError(str(exc), field=exc.field) from exc
        outcome = _outcome(final)
        _note_pause(self.layer.history, run_id, final.get("workflow_id"), outcome)  # another HITL node
        return {
            "action": action,
            "run_id": run_id,
            "actor": actor,
            "status": {"approve": "approved", "reject": "rejected", "modify": "modified"}[action],
            "run_status": (self.layer.history.run(run_id) or {}).get("status"),
            **{k: v for k, v in outcome.items() if k != "status"},
        }

    def approve(self, run_id: str, actor: str = "unknown", rationale: str | None = None) -> dict[str, Any]:
        """Resume the paused run with `approve`."""
        return self._resume(run_id, "approve", _decision("approve", rationale), actor)

    def reject(self, run_id: str, actor: str = "unknown", rationale: str | None = None) -> dict[str, Any]:
        """Resume the paused run with `reject`: the run ends, its result says why."""
        return self._resume(run_id, "reject", _decision("reject", rationale), actor)

    def modify(
        self, run_id: str, actor: str = "unknown", changes: Any = None, rationale: str | None = None
    ) -> dict[str, Any]:
        """Resume the paused run with `edit`: `changes` replace the paused node's result.

        Raises:
            HitlRequestError: `changes` holds an agent-config key (`llm`, `prompt`, ...): EchoAI's modify
                edits the agent and re-validates the workflow, which a paused run cannot take.
        """
        if isinstance(changes, Mapping):
            for key in AGENT_CONFIG_KEYS:
                if key in changes:
                    raise HitlRequestError(
                        f"hitl modify: changes.{key} is an agent-config change ({key}={changes[key]!r}); "
                        "a paused run cannot take it. Edit the agent and start a new run, or send the "
                        "paused node's corrected result as changes.edited_output",
                        field=f"changes.{key}",
                        value=changes[key],
                    )
        decision = _decision("edit", rationale)
        if isinstance(changes, Mapping) and "edited_output" in changes:
            changes = {"crew_result": changes["edited_output"]}
        decision["edits"] = changes  # not an object: resume_run's 422 names `edits`
        return self._resume(run_id, "modify", decision, actor)

    def defer(
        self,
        run_id: str,
        actor: str = "unknown",
        defer_until: datetime | str | None = None,
        rationale: str | None = None,
    ) -> dict[str, Any]:
        """Postpone the decision, as EchoAI's manager does: the run stays paused, its status is `deferred`
        (off the pending list) until `defer_until` passes, if given, and the deferral is kept with who
        and why among the run's decisions. A later approve, reject or modify still resumes it.

        Raises:
            HitlRequestError: the run is unknown or not paused (`status`), or `defer_until` is not a time.
        """
        history = self.layer.history
        record = history.run(run_id)
        if record is None:
            raise HitlRequestError(f"no recorded run has run_id {run_id!r}", field="run_id", value=run_id)
        if record.get("status") != "interrupted":
            raise HitlRequestError(
                f"run {run_id!r} is {record.get('status')!r}, not 'interrupted': only a run paused at a HITL "
                "node can be deferred",
                field="status",
                value=record.get("status"),
            )
        until = _instant(defer_until)
        from echo_tools.events import ToolEvent

        decision = {**_decision("defer", rationale), "actor": actor, "defer_until": until}
        history.record(
            ToolEvent(type=DEFERRED, run_id=run_id, workflow_id=record.get("workflow_id"), input=decision)
        )
        return {
            "action": "defer",
            "run_id": run_id,
            "actor": actor,
            "status": "deferred",
            "defer_until": until,
            "can_resume": True,  # EchoAI said False, yet offered no way back; here a decision resumes it
        }

    def get_status(self, run_id: str) -> dict[str, Any]:
        """EchoAI's status shape from the run history (`defer_until` while a deferral holds)."""
        record = self.layer.history.run(run_id) or {}
        status = record.get("status")
        request = self._request(run_id) if status == "interrupted" else {}
        deferral = self._deferral(run_id) if status == "interrupted" else None
        state = "waiting_for_human" if status == "interrupted" else (status or "unknown")
        answer = {
            "run_id": run_id,
            "state": "deferred" if deferral is not None else state,
            "blocked_at": request.get("node_id"),
            "allowed_actions": ["approve", "reject", "modify", "defer"],
            "has_pending_review": status == "interrupted" and deferral is None,
        }
        if deferral is not None:
            answer["defer_until"] = deferral.get("defer_until")
        return answer

    def _deferral(self, run_id: str) -> dict[str, Any] | None:
        """The deferral holding the paused run back: the latest HITL mark is a deferral whose time (if
        any) has not passed; a resume or a new pause after it ends it."""
        last = None
        for event in self.layer.history.run_events(run_id):  # a read waits for what was recorded
            if event.type in _HITL_MARKS:
                last = event
        if last is None or last.type != DEFERRED:
            return None
        deferral = dict(last.input or {})
        until = deferral.get("defer_until")
        if until and datetime.fromisoformat(str(until)) <= datetime.now(UTC):
            return None  # the time to revisit has come: pending again
        return deferral

    def get_context(self, run_id: str) -> _Context | None:
        """The paused node's request and the state it paused with (None: no paused run)."""
        try:
            answer = runner.run_status(run_id, storage=self.layer.history)
        except runner.RunResumeError:
            return None
        if answer["status"] != "interrupted":
            return None
        state = dict(answer["state"])
        requests = state.pop("__interrupt__", [])
        request = requests[0] if requests else {}
        return _Context(
            {
                "workflow_id": state.get("workflow_id"),
                "run_id": run_id,
                "blocked_at": request.get("node_id") if isinstance(request, Mapping) else None,
                "agent_output": state.get("crew_result"),
                "request": request,
                "state_snapshot": {k: v for k, v in state.items() if k != "messages"},
            }
        )

    def get_decisions(self, run_id: str) -> list[_Context]:
        """The decisions the run was resumed with, and its deferrals, oldest first."""
        events = self.layer.history.run_events(run_id)
        return [
            _Context({"run_id": run_id, **dict(e.input or {})})
            for e in events
            if e.type in ("run.resumed", DEFERRED)
        ]

    def list_pending_reviews(self) -> list[dict[str, Any]]:
        """The recorded runs paused at a HITL node."""
        history = self.layer.history
        return [
            {"run_id": r.run_id, "workflow_id": r.workflow_id, "created_at": r.started}
            for r in history.runs(limit=500)
            if (history.run(r.run_id) or {}).get("status") == "interrupted"
            and self._deferral(r.run_id) is None
        ]

    def _request(self, run_id: str) -> dict[str, Any]:
        context = self.get_context(run_id)
        request = context.data.get("request") if context else None
        return dict(request) if isinstance(request, Mapping) else {}


class _Context:
    """A dict with EchoAI's `to_dict()` (its routes call it on contexts and decisions)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)


def _instant(value: datetime | str | None) -> str | None:
    """`defer_until` as an ISO time in UTC (a time without a zone is taken as UTC); None stays None."""
    if value is None or value == "":
        return None
    try:
        when = (
            value
            if isinstance(value, datetime)
            else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        )
    except ValueError as exc:
        raise HitlRequestError(
            f"defer_until must be an ISO 8601 time such as '2026-01-20T10:00:00Z', got {value!r}",
            field="defer_until",
            value=value,
        ) from exc
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat()


def _decision(kind: str, rationale: str | None) -> dict[str, Any]:
    decision: dict[str, Any] = {"decision": kind}
    if rationale:
        decision["comment"] = rationale
    return decision


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
