"""Nested calls form a tree of events: every event names its call and the composite call that made it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from echo_tools import MemoryEventLog, ToolContext, ToolDef, ToolExecutor, ToolRegistry
from echo_tools.backends.base import ToolBackend
from echo_tools.backends.local import LocalBackend
from echo_tools.backends.skill import SkillBackend

MODULE = "tests.echo_tools.fixture_tools.basic"
NUMBER = {"type": "number"}


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    reg = ToolRegistry(storage_dir=tmp_path, allowed_modules=["tests"])
    reg.register(
        ToolDef(
            tool_id="add",
            name="add",
            execution_config={"module": MODULE, "function": "add"},
            input_schema={"type": "object", "properties": {"a": NUMBER, "b": NUMBER}},
        )
    )
    reg.register(
        ToolDef(
            tool_id="twice",
            name="twice",
            tool_type="skill",
            execution_config={
                "steps": [
                    {"id": "one", "tool": "add", "input": {"a": "$.input.x", "b": 1}},
                    {
                        "id": "two",
                        "tool": "add",
                        "input": {"a": "$.steps.one.output", "b": 1},
                        "depends_on": ["one"],
                    },
                ],
                "output": "$.steps.two.output",
            },
            input_schema={"type": "object", "properties": {"x": NUMBER}},
        )
    )
    reg.register(
        ToolDef(
            tool_id="outer",
            name="outer",
            tool_type="skill",
            execution_config={"steps": [{"id": "inner", "tool": "twice", "input": {"x": "$.input.x"}}]},
            input_schema={"type": "object", "properties": {"x": NUMBER}},
        )
    )
    return reg


async def _run(registry: ToolRegistry, ref: str, args: dict[str, Any], context: ToolContext | None = None):
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log])
    try:
        result = await executor.invoke(ref, args, context)
    finally:
        await executor.aclose()
    return result, log.events


async def test_a_skills_step_events_name_the_skill_call_as_their_parent(registry: ToolRegistry) -> None:
    result, events = await _run(registry, "twice", {"x": 1})

    assert result.success, result.error
    assert result.output == 3
    skill = [e for e in events if e.tool_id == "twice"]
    steps = [e for e in events if e.tool_id == "add"]
    assert [e.type for e in skill] == ["tool.invoked", "tool.completed"]
    skill_call = skill[0].call_id
    assert skill_call and skill[1].call_id == skill_call and skill[0].parent_call_id is None
    assert len(steps) == 4 and all(e.parent_call_id == skill_call for e in steps)
    # each step is a call of its own: its invoked and completed events share an id unlike the other step's
    step_calls = {e.call_id for e in steps}
    assert len(step_calls) == 2 and skill_call not in step_calls
    assert all(e.to_dict()["call_id"] for e in events)


async def test_two_levels_of_skills_form_a_tree(registry: ToolRegistry) -> None:
    result, events = await _run(registry, "outer", {"x": 5})

    assert result.success, result.error
    by_tool = {e.tool_id: e for e in events if e.type == "tool.invoked"}
    outer, twice = by_tool["outer"], by_tool["twice"]
    assert twice.parent_call_id == outer.call_id
    adds = [e for e in events if e.tool_id == "add"]
    assert adds and all(e.parent_call_id == twice.call_id for e in adds)


async def test_every_call_gets_its_own_id_and_a_caller_may_name_it(registry: ToolRegistry) -> None:
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log])
    await executor.invoke("add", {"a": 1, "b": 2})
    await executor.invoke("add", {"a": 1, "b": 2})
    await executor.invoke("add", {"a": 1, "b": 2}, ToolContext(call_id="mine", parent_call_id="up"))
    await executor.aclose()
    ids = [e.call_id for e in log.events]
    assert ids[0] == ids[1] != ids[2] == ids[3]
    assert ids[4:] == ["mine", "mine"] and log.events[5].parent_call_id == "up"
    assert len(ids[0] or "") == 32


async def test_a_refused_call_carries_its_call_id_too(registry: ToolRegistry) -> None:
    result, events = await _run(registry, "add", {"a": "one"}, ToolContext(parent_call_id="p1"))

    assert not result.success and result.error_field == "input.a"
    assert [e.type for e in events] == ["tool.failed"]
    assert events[0].call_id and events[0].parent_call_id == "p1"


def test_only_composite_backends_declare_that_they_nest() -> None:
    assert ToolBackend.nests is False and LocalBackend.nests is False
    assert SkillBackend.nests is True
    from workflow_bridge.composite import AgentBackend, WorkflowBackend

    assert WorkflowBackend.nests is True and AgentBackend.nests is True


async def test_a_workflow_tools_inner_tool_events_name_the_workflow_call(tmp_path: Path) -> None:
    from echo_tools.stores import AgentStore, WorkflowStore
    from tests.workflow_bridge._compiler_support import MODULE as WF_MODULE
    from tests.workflow_bridge._compiler_support import agent, make_executor, tool_definitions, workflow

    researcher = agent("agt_r", name="Researcher", tools=["Echo"], output_schema=["findings"])
    wf, agents = workflow([researcher], [], workflow_id="wf_r")
    workflows, agent_store = WorkflowStore(tmp_path / "wf"), AgentStore(tmp_path / "agents")
    workflows.save(wf)
    for a in agents.values():
        agent_store.save(a)
    registry = ToolRegistry(allowed_modules=[WF_MODULE], workflows=workflows, agents=agent_store)
    for definition in tool_definitions():
        registry.register(definition)
    registry.register(
        {"tool_id": "research", "name": "Research", "tool_type": "workflow",
         "execution_config": {"workflow_id": "wf_r"}}
    )  # fmt: skip
    executor, log = make_executor(registry)
    result = await executor.invoke("research", {"user_input": "tin"})
    await executor.aclose()

    assert result.success, result.error
    outer = [e for e in log.events if e.tool_id == "research"]
    inner = [e for e in log.events if e.tool_id == "tool_echo"]
    assert outer[0].call_id and outer[0].call_id == outer[-1].call_id
    assert inner and all(e.parent_call_id == outer[0].call_id for e in inner)
