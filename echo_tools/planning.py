"""The execution planner and the dependency graph (Toolify RFC-0003 §5.2-5.3).

`plan(registry, capabilities=[...], inputs={...})` maps each requested capability (or a tool named
directly) to the active tools that provide it: the first is the step's tool, the others its fallback chain.
A tool's `dependencies` are planned before it. The result is a skill's `execution_config`:
`{"steps": [{id, tool, input, depends_on, fallback}], "output": "$.steps.<last>.output"}`.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from echo_tools.errors import ToolNotFoundError, ToolRegistrationError
from echo_tools.models import ToolDef, ToolStatus

if TYPE_CHECKING:
    from echo_tools.lookup import ToolLookup

MAX_PLAN_STEPS = 64


class PlanStep(BaseModel):
    """One step of a plan: the tool that runs, where its input comes from, what it waits for."""

    id: str
    tool: str
    input: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)
    fallback: list[str] = Field(default_factory=list)


class Plan(BaseModel):
    """An ordered set of steps; `execution_config()` is the shape a `skill` tool stores."""

    steps: list[PlanStep]
    output: Any

    def execution_config(self) -> dict[str, Any]:
        """The plan as a skill's `execution_config`."""
        return self.model_dump(mode="json")


def dependency_graph(tools: list[ToolDef]) -> dict[str, list[Any]]:
    """`{"nodes": [ids], "edges": [[dependency, dependent], ...]}` over `tools` (sorted, stable)."""
    known = {t.tool_id for t in tools}
    nodes = sorted(known)
    edges = sorted([dep, t.tool_id] for t in tools for dep in t.dependencies if dep in known)
    return {"nodes": nodes, "edges": edges}


def _providers(tools: list[ToolDef], wanted: str, registry: ToolLookup) -> list[ToolDef]:
    direct = registry.resolve(wanted)
    if direct is not None and direct.status == ToolStatus.ACTIVE:
        return [direct]  # direct mapping: a known tool for a known task
    matching = [t for t in tools if wanted in t.capabilities]
    # a deterministic order: pure before idempotent before external, then fewer dependencies, then id
    order = {"pure": 0, "idempotent": 1, "external": 2}
    return sorted(matching, key=lambda t: (order.get(t.side_effect.value, 3), len(t.dependencies), t.tool_id))


def _step_input(tool: ToolDef, inputs: dict[str, Any], earlier: list[tuple[str, ToolDef]]) -> dict[str, Any]:
    """Each input property from the plan's inputs when given, else from an earlier step's output."""
    mapped: dict[str, Any] = {}
    for prop in tool.input_schema.get("properties", {}) or {}:
        if prop in inputs:
            mapped[prop] = f"$.input.{prop}"
            continue
        for step_id, producer in reversed(earlier):
            if prop in (producer.output_schema.get("properties") or {}):
                mapped[prop] = f"$.steps.{step_id}.output.{prop}"
                break
    return mapped


def plan(registry: ToolLookup, capabilities: list[str], inputs: dict[str, Any] | None = None) -> Plan:
    """Plan the steps that provide `capabilities` (capability names or tool refs), in order.

    Args:
        registry: where tools are looked up (active tools only).
        capabilities: what the plan must do, in order; each a capability or a tool id or name.
        inputs: the values the plan will be run with; their keys feed matching input properties.

    Raises:
        ToolNotFoundError: no active tool provides a capability (the message names it and the known ones).
        ToolRegistrationError: a dependency is unknown or the dependencies form a cycle (the chain named).
    """
    if not capabilities:
        raise ValueError("capabilities must name at least one capability or tool, got []")
    inputs = inputs or {}
    tools = [t for t in registry.list_all() if t.status == ToolStatus.ACTIVE]
    steps: list[PlanStep] = []
    planned: dict[str, str] = {}  # tool_id -> step id
    earlier: list[tuple[str, ToolDef]] = []

    def add(tool: ToolDef, fallback: list[str], chain: tuple[str, ...]) -> str:
        if tool.tool_id in chain:
            cycle = " -> ".join((*chain[chain.index(tool.tool_id) :], tool.tool_id))
            raise ToolRegistrationError(f"dependencies form a cycle: {cycle}", field="dependencies")
        if tool.tool_id in planned:
            return planned[tool.tool_id]
        needs = []
        for dep_id in tool.dependencies:
            dep = registry.resolve(dep_id)
            if dep is None or dep.status != ToolStatus.ACTIVE:
                raise ToolRegistrationError(
                    f"tool {tool.tool_id!r} depends on {dep_id!r}, which is not an active tool",
                    tool_id=tool.tool_id,
                    field="dependencies",
                )
            needs.append(add(dep, [], (*chain, tool.tool_id)))
        if len(steps) >= MAX_PLAN_STEPS:
            raise ToolRegistrationError(
                f"a plan may have at most {MAX_PLAN_STEPS} steps", field="capabilities"
            )
        step_id = f"s{len(steps) + 1}"
        steps.append(
            PlanStep(
                id=step_id,
                tool=tool.tool_id,
                input=_step_input(tool, inputs, earlier),
                depends_on=needs,
                fallback=fallback,
            )
        )
        planned[tool.tool_id] = step_id
        earlier.append((step_id, tool))
        return step_id

    for wanted in capabilities:
        providers = _providers(tools, wanted, registry)
        if not providers:
            known = sorted({c for t in tools for c in t.capabilities})
            close = difflib.get_close_matches(wanted, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ToolNotFoundError(
                f"no active tool provides capability {wanted!r} (known capabilities: "
                f"{', '.join(known) or 'none'}){hint}",
                field="capabilities",
            )
        add(providers[0], [t.tool_id for t in providers[1:]], ())
    return Plan(steps=steps, output=f"$.steps.{steps[-1].id}.output")
