"""Running a workflow from a canvas, a workflow + agents pair, or a JSON file: the API the CLI calls.

`compile_source` turns any accepted source into a compiled graph (canvas payloads go through NodeMapper;
its errors are raised with the diagnostics listed). `run_workflow` runs it as EchoAI's runtime does and
reports progress to `on_event` as it happens: node start and finish (LangGraph's custom stream), every
tool event of the run (an executor sink), a rehearsal notice when no LLM is configured, and the end.
"""

from __future__ import annotations

import json
import logging
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.llm import check_llm, describe_llm
from workflow_bridge.llm_rehearsal import REHEARSAL_NOTICE
from workflow_bridge.node_mapper import MappedWorkflow, NodeMapper
from workflow_bridge.state import initial_state

logger = logging.getLogger("workflow_bridge.runner")

EventCallback = Callable[[dict[str, Any]], Any]
_REHEARSAL: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_MODELS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()
_NAMES: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()


class WorkflowSourceError(ValueError):
    """A workflow source that cannot be compiled; `diagnostics` lists NodeMapper's findings."""

    def __init__(self, message: str, diagnostics: list[Any] | None = None) -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics or [])


def load_source(source: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """The source as a JSON object: a dict as given, or the contents of a JSON file."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkflowSourceError(
            f"workflow file {str(path)!r} cannot be read: {exc.strerror or exc}"
        ) from exc
    except json.JSONDecodeError as exc:
        raise WorkflowSourceError(
            f"workflow file {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}"
        ) from exc
    if not isinstance(data, dict):
        raise WorkflowSourceError(
            f"workflow file {str(path)!r} must hold a JSON object, got {type(data).__name__}"
        )
    return data


def map_source(data: Mapping[str, Any], registry: Any) -> MappedWorkflow:
    """A `MappedWorkflow` for a canvas payload / export (through NodeMapper) or a `{workflow, agents}` pair.

    Raises:
        WorkflowSourceError: the shape is not recognised, or NodeMapper reported errors (listed).
    """
    if isinstance(data.get("workflow"), Mapping) and "agents" in data:
        agents = data["agents"]
        if isinstance(agents, list):
            agents = {str(a.get("agent_id")): a for a in agents if isinstance(a, Mapping)}
        if not isinstance(agents, Mapping):
            raise WorkflowSourceError(f"'agents' must map agent ids to agents, got {type(agents).__name__}")
        return MappedWorkflow(workflow=dict(data["workflow"]), agents=dict(agents))
    if "canvas_nodes" in data or "nodes" in data:
        mapped = NodeMapper(registry).map_canvas(data)
        if not mapped.ok:
            lines = [f"  {d.level} {d.node_id or '-'}.{d.field or '-'}: {d.message}" for d in mapped.errors]
            raise WorkflowSourceError(
                f"the canvas has {len(lines)} error(s):\n" + "\n".join(lines), mapped.diagnostics
            )
        return mapped
    if "connections" in data and "agents" in data:
        raise WorkflowSourceError(
            'this is a workflow JSON without its agent JSONs; give {"workflow": ..., "agents": {...}}'
        )
    raise WorkflowSourceError(
        "unrecognised workflow source: expected a canvas payload (canvas_nodes), a canvas export (nodes), "
        f'or {{"workflow", "agents"}}; got keys {sorted(data)[:10]}'
    )


def compile_source(
    source: Mapping[str, Any] | str | Path,
    registry: Any,
    executor: Any,
    *,
    llm: Any = None,
    missing_agents: str = "error",
) -> tuple[Any, MappedWorkflow]:
    """Compile any accepted source; returns (compiled graph, mapped workflow).

    Raises:
        WorkflowSourceError: unreadable or unrecognised source, or canvas errors (listed).
        WorkflowCompileError / ToolNotFoundError: the workflow cannot become a graph.
    """
    mapped = map_source(load_source(source), registry)
    compiler = WorkflowCompiler(registry, executor, llm, missing_agents=missing_agents)
    graph = compiler.compile(mapped.workflow, mapped.agents)
    _REHEARSAL[graph] = compiler.uses_rehearsal
    _MODELS[graph] = compiler.models
    _NAMES[graph] = {
        str(i): str(a["name"]) for i, a in mapped.agents.items() if isinstance(a, Mapping) and a.get("name")
    }
    return graph, mapped


def uses_rehearsal(graph: Any) -> bool:
    """True when a graph from `compile_source` runs some agent on the offline rehearsal model."""
    return _REHEARSAL.get(graph, False)


def models_of(graph: Any) -> dict[str, Any]:
    """The model of each agent of a graph from `compile_source` (agent id -> CrewAI LLM)."""
    return dict(_MODELS.get(graph) or {})


def check_models(graph: Any) -> None:
    """Check every distinct model of a graph from `compile_source` before running it (`llm.check_llm`).

    Raises:
        LLMConfigError: a model's server does not answer or its API key is not set, in one sentence.
    """
    seen: set[str] = set()
    for llm in models_of(graph).values():
        label = describe_llm(llm)
        if label not in seen:
            seen.add(label)
            check_llm(llm)


def run_workflow(
    source: Mapping[str, Any] | str | Path,
    *,
    registry: Any,
    executor: Any,
    user_input: str | None = None,
    llm: Any = None,
    on_event: EventCallback | None = None,
    run_id: str | None = None,
    payload: Mapping[str, Any] | None = None,
    missing_agents: str = "error",
    check_llms: bool = False,
) -> dict[str, Any]:
    """Compile and run a workflow; returns the final state (with `__interrupt__` when a HITL node paused).

    Args:
        source: canvas payload or export, `{workflow, agents}`, or a path to a JSON file holding one.
        user_input: the request (EchoAI's `message`); default: found in `payload` as EchoAI does.
        llm: a model or spec for every agent (`"openai/gpt-4o-mini"`, `"rehearsal"`); default each agent's.
        on_event: called with dicts as things happen: `type` is `run.started`, `llm.rehearsal`,
            `node.started`, `node.finished`, `tool.*` (the executor event), `run.interrupted`, `run.finished`.
        run_id: the LangGraph thread id and the run id in every event; default a new `run_<hex>`.
        payload: extra input keys (EchoAI's `input_payload`).
        check_llms: check every model before the run (`check_models`): an unreachable server or a
            missing API key fails in one sentence instead of once per agent call.

    Raises:
        LLMConfigError: `check_llms`, and a model cannot be used.
    """
    data = load_source(source)
    graph, mapped = compile_source(data, registry, executor, llm=llm, missing_agents=missing_agents)
    if check_llms:
        check_models(graph)
    if user_input is None and not payload:
        # sample canvases carry a ready request, so `echo-tools run FILE` works without --input
        user_input = _default_input(data) or _default_input(mapped.workflow)
    run_id = run_id or f"run_{uuid.uuid4().hex}"
    workflow_id = mapped.workflow.get("workflow_id")
    state = initial_state(user_input, workflow_id, run_id, **dict(payload or {}))
    start = {
        "type": "run.started",
        "run_id": run_id,
        "workflow_id": workflow_id,
        "name": mapped.workflow.get("name"),
        "models": sorted({describe_llm(m) for m in models_of(graph).values()}),
    }
    return stream_run(graph, state, run_id, executor=executor, on_event=on_event, started=start)


def resume_workflow(
    graph: Any, run_id: str, decision: Any, *, executor: Any, on_event: EventCallback | None = None
) -> dict[str, Any]:
    """Resume a run that a HITL node paused, with the reviewer's decision (same graph, same run id).

    Args:
        decision: `"approve"`, `"reject"` or `{"decision": "approve"|"reject"|"edit", "edited_output",
            "comment"}`.
    """
    from langgraph.types import Command

    start = {"type": "run.resumed", "run_id": run_id, "decision": decision}
    return stream_run(
        graph, Command(resume=decision), run_id, executor=executor, on_event=on_event, started=start
    )


def stream_run(
    graph: Any,
    graph_input: Any,
    run_id: str,
    *,
    executor: Any,
    on_event: EventCallback | None = None,
    started: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run a compiled graph on thread `run_id`, reporting progress to `on_event`; returns the final state."""
    emit = _safe(on_event)
    emit(started or {"type": "run.started", "run_id": run_id})
    if uses_rehearsal(graph):
        logger.warning(REHEARSAL_NOTICE)
        emit({"type": "llm.rehearsal", "run_id": run_id, "message": REHEARSAL_NOTICE})
    config = {"configurable": {"thread_id": run_id}}

    names = _NAMES.get(graph) or {}
    nested = f"{run_id}/"  # sub-runs of `workflow` / `agent` tools called in this run (composite.py)

    def forward(event: Any) -> None:
        if event.run_id == run_id or (event.run_id or "").startswith(nested):
            data = event.to_dict()
            name = names.get(str(data.get("agent_id")))
            if name:
                data["agent_name"] = name  # which canvas node called; agent ids stay as they are
            emit(data)

    executor.add_sink(forward)
    interrupts: list[Any] = []
    try:
        for mode, chunk in graph.stream(graph_input, config, stream_mode=["updates", "custom"]):
            if mode == "custom" and isinstance(chunk, dict):
                emit({**chunk, "run_id": run_id})
            elif mode == "updates" and isinstance(chunk, dict) and "__interrupt__" in chunk:
                interrupts.extend(chunk["__interrupt__"])
                values = [getattr(i, "value", i) for i in chunk["__interrupt__"]]
                emit({"type": "run.interrupted", "run_id": run_id, "interrupts": values})
    finally:
        executor.remove_sink(forward)
    final = dict(graph.get_state(config).values)
    if interrupts:
        final["__interrupt__"] = interrupts
    emit({"type": "run.finished", "run_id": run_id, "status": "interrupted" if interrupts else "completed"})
    return final


def _default_input(data: Mapping[str, Any]) -> str | None:
    meta = data.get("metadata")
    value = meta.get("default_input") if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) and value else None


def _safe(on_event: EventCallback | None) -> EventCallback:
    def emit(event: dict[str, Any]) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:  # boundary: a broken progress callback must not break the run
            logger.exception("on_event callback raised on %s", event.get("type"))

    return emit
