"""Workflow sources for the runner: a canvas payload or export, a `{workflow, agents}` pair, or a JSON file
holding one, read (`load_source`), mapped (`map_source`, through NodeMapper) and compiled (`compile_source`),
with the models each compiled graph uses remembered (`models_of`, `uses_rehearsal`, `check_models`).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.llm import check_llm, describe_llm
from workflow_bridge.node_mapper import MappedWorkflow, NodeMapper

_REHEARSAL: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_MODELS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


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
    source: Mapping[str, Any] | str | Path, registry: Any, executor: Any, **options: Any
) -> tuple[Any, MappedWorkflow]:
    """Compile any accepted source; returns (compiled graph, mapped workflow).

    `options` go to `WorkflowCompiler` (`llm`, `missing_agents`, `checkpointer`, `state_keys`). Give the
    run's payload keys as `state_keys`: LangGraph would otherwise drop them before any node reads them.

    Raises:
        WorkflowSourceError: unreadable or unrecognised source, or canvas errors (listed).
        WorkflowCompileError / ToolNotFoundError: the workflow cannot become a graph.
    """
    mapped = map_source(load_source(source), registry)
    compiler = WorkflowCompiler(registry, executor, **options)
    graph = compiler.compile(mapped.workflow, mapped.agents)
    _REHEARSAL[graph] = compiler.uses_rehearsal
    _MODELS[graph] = compiler.models
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


def default_input(data: Mapping[str, Any]) -> str | None:
    """The ready request a sample canvas carries (`metadata.default_input`), if any."""
    meta = data.get("metadata")
    value = meta.get("default_input") if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) and value else None
