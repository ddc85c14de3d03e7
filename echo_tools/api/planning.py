"""The planner's routes: `POST /tools/plan` (a plan, optionally registered as a skill) and `GET /tools/graph`.

A plan registered here is a remote definition like any other registered over HTTP
(`ToolRegistry.register_remote`): it may replace only another `remote` tool, and its steps are checked as
any skill's are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import anyio
from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from echo_tools.api.errors import ApiError
from echo_tools.api.shapes import list_item
from echo_tools.gate import READ, Principal
from echo_tools.models import ToolDef, ToolType
from echo_tools.planning import MAX_PLAN_STEPS, Plan, plan

if TYPE_CHECKING:
    from echo_tools.api.state import ApiState

__all__ = ["PlanRegistration", "PlanRequest", "add_planning_routes", "skill_of"]

Capability = Annotated[str, Field(min_length=1, max_length=200)]


class PlanRegistration(BaseModel):
    """Register the plan as a `skill` tool under this id and name."""

    model_config = ConfigDict(extra="forbid")

    tool_id: str = Field(min_length=1, max_length=200)
    name: str = Field(min_length=1, max_length=200)
    description: str = Field(default="", max_length=4_000)


class PlanRequest(BaseModel):
    """`POST /tools/plan`: what the plan must do, in order, and the inputs it will be run with."""

    model_config = ConfigDict(extra="forbid")

    capabilities: list[Capability] = Field(min_length=1, max_length=MAX_PLAN_STEPS)
    inputs: dict[str, Any] = Field(default_factory=dict)
    # "register" in JSON (the name would shadow pydantic's `BaseModel.register`)
    registration: PlanRegistration | None = Field(default=None, alias="register")


def skill_of(found: Plan, inputs: dict[str, Any], registration: PlanRegistration) -> ToolDef:
    """The `skill` tool running `found`; its input schema names the plan's input keys."""
    return ToolDef(
        tool_id=registration.tool_id,
        name=registration.name,
        description=registration.description or f"Planned skill: {', '.join(s.tool for s in found.steps)}",
        tool_type=ToolType.SKILL,
        input_schema={"type": "object", "properties": {key: {} for key in inputs}},
        execution_config=found.execution_config(),
    )


def add_planning_routes(router: APIRouter, state: ApiState, secured: list[Any]) -> None:
    """Add the routes to the `/tools` router (before its `/{tool_id}` routes, which would shadow them)."""
    from echo_tools.api.owners import owned_copy

    reader = state.gate.requires(READ)

    @router.post("/plan", dependencies=secured, summary="Plan the tools providing capabilities; register it")
    async def plan_route(request: PlanRequest = Body(...), principal: Principal = reader) -> dict[str, Any]:
        if request.registration is not None and not principal.may("register"):
            raise ApiError(
                403,
                "permission_denied",
                f"Principal {principal.name!r} may not 'register': a plan is registered only with it",
                field="register",
            )
        found = await anyio.to_thread.run_sync(
            lambda: plan(state.registry, request.capabilities, request.inputs)
        )
        answer = found.execution_config()
        if request.registration is not None:
            skill = owned_copy(
                state.registry, skill_of(found, request.inputs, request.registration), principal
            )
            outcome = await anyio.to_thread.run_sync(
                lambda: state.registry.register_remote(skill, allowed_env=state.settings.allowed_env)
            )
            answer["registered"] = {**outcome, **list_item(state.registry.require(skill.tool_id))}
        return answer

    @router.get("/graph", dependencies=secured, summary="The tools' dependency graph")
    async def graph_route() -> dict[str, list[Any]]:
        return await anyio.to_thread.run_sync(state.registry.graph)
