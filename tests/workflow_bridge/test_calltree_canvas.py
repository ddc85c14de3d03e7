"""Canvas Subworkflow entries bind `workflow` tools, or are error diagnostics naming the node and the entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from echo_tools.errors import ToolNotFoundError
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from echo_tools.stores import AgentStore, WorkflowStore
from tests.workflow_bridge._compiler_support import MODULE, agent, tool_definitions, workflow
from tests.workflow_bridge._mapper_support import chain, node
from workflow_bridge.agent_factory import AgentFactory
from workflow_bridge.node_mapper import NodeMapper


def _registry(tmp_path: Path, *, stored: bool = True, store: bool = True) -> ToolRegistry:
    workflows = agents = None
    if store:
        workflows, agents = WorkflowStore(tmp_path / "wf"), AgentStore(tmp_path / "agents")
    if stored and workflows is not None and agents is not None:
        researcher = agent("agt_r", name="Researcher", tools=["Echo"], output_schema=["findings"])
        wf, wf_agents = workflow([researcher], [], workflow_id="wf_r")
        wf["name"] = "Research"
        workflows.save(wf)
        for a in wf_agents.values():
            agents.save(a)
    registry = ToolRegistry(allowed_modules=[MODULE], workflows=workflows, agents=agents)
    for definition in tool_definitions():
        registry.register(definition)
    return registry


def _entry(kind: str = "subworkflow", **config: Any) -> dict[str, Any]:
    return {"id": 7, "name": "Subworkflow", "type": kind, "enabled": True, "config": config}


def _map(registry: ToolRegistry, *entries: dict[str, Any]) -> Any:
    return NodeMapper(registry).map_canvas(
        chain(node("n1", "Agent", tools=list(entries)), workflow_id="wf_top")
    )


def _only_agent(mapped: Any) -> dict[str, Any]:
    (only,) = mapped.agents.values()
    return only  # type: ignore[no-any-return]


def test_an_entry_binds_the_registered_workflow_tool_and_round_trips(tmp_path: Path) -> None:
    registry = _registry(tmp_path, store=False)
    registry.register(
        {"tool_id": "research", "name": "Research", "tool_type": "workflow",
         "execution_config": {"workflow_id": "wf_r"}}
    )  # fmt: skip
    mapped = _map(registry, _entry(workflowId="wf_r"))

    assert mapped.ok, mapped.diagnostics
    bound = _only_agent(mapped)
    assert bound["tools"] == ["research"]
    assert bound["tool_bindings"][0]["type"] == "subworkflow"
    assert bound["tool_bindings"][0]["config"] == {"workflowId": "wf_r"}
    mapper = NodeMapper(registry)
    again = mapper.map_canvas(mapper.to_canvas(mapped.workflow, mapped.agents))
    assert again.ok and _only_agent(again)["tools"] == ["research"]


def test_an_entry_registers_a_workflow_tool_from_the_store_once(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    first = _map(registry, _entry(workflowId="wf_r"))
    second = _map(registry, _entry(workflowId="wf_r"))

    assert first.ok and second.ok, (first.diagnostics, second.diagnostics)
    tool = registry.require("subworkflow_wf_r")
    assert tool.tool_type.value == "workflow" and tool.execution_config == {"workflow_id": "wf_r"}
    assert tool.name == "Subworkflow Research"
    assert _only_agent(first)["tools"] == _only_agent(second)["tools"] == ["subworkflow_wf_r"]
    assert [t.tool_id for t in registry.list_by_type("workflow")] == ["subworkflow_wf_r"]


@pytest.mark.parametrize("store", [True, False])
def test_an_entry_naming_no_known_workflow_is_an_error_naming_node_entry_and_id(
    tmp_path: Path, store: bool
) -> None:
    mapped = _map(_registry(tmp_path, stored=False, store=store), _entry(workflowId="wf_gone"))

    assert not mapped.ok
    (error,) = mapped.errors
    assert error.node_id == "n1" and error.field == "config.tools[0].config"
    assert "'n1'" in error.message and "config.tools[0]" in error.message and "'wf_gone'" in error.message
    assert _only_agent(mapped)["tools"] == []


def test_an_entry_without_a_workflow_id_is_an_error_naming_the_value(tmp_path: Path) -> None:
    mapped = _map(_registry(tmp_path), _entry(workflowId=""))
    (error,) = mapped.errors
    assert "names no workflowId (config.workflowId is '')" in error.message and "'n1'" in error.message


def test_a_deployment_entry_naming_no_deployment_is_an_error_naming_it_with_a_hint(tmp_path: Path) -> None:
    mapped = _map(
        _registry(tmp_path), _entry("subworkflow_deployment", deploymentId="dep_1", environment="prod")
    )
    (error,) = mapped.errors
    assert error.node_id == "n1" and "'dep_1'" in error.message and "'prod'" in error.message
    assert "is not deployed" in error.message and "WorkflowStore.deploy(" in error.message
    assert _only_agent(mapped)["tools"] == []


def _factory(registry: ToolRegistry) -> AgentFactory:
    return AgentFactory(registry, ToolExecutor(registry))


def test_an_agents_builtin_subworkflow_binds_the_workflow_tool(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    stored_agent = {
        "agent_id": "agt_lead", "name": "Lead", "tools": ["builtin_subworkflow", "Echo"],
        "tool_bindings": [{"tool_id": "builtin_subworkflow", "config": {"workflowId": "wf_r"}}],
    }  # fmt: skip
    factory = _factory(registry)
    assert [t.tool_id for t, _ in factory.resolve_tools(stored_agent)] == ["subworkflow_wf_r", "tool_echo"]
    factory.executor.close()


@pytest.mark.parametrize(
    ("ref", "config", "says"),
    [
        ("builtin_subworkflow", {"workflowId": "wf_gone"}, "'wf_gone'"),
        ("builtin_subworkflow", {}, "names no workflowId"),
        ("builtin_subworkflow_deployment", {"deploymentId": "dep_1"}, "is not deployed"),
    ],
)
def test_an_agents_unbindable_subworkflow_is_an_error_not_a_silent_drop(
    tmp_path: Path, ref: str, config: dict[str, Any], says: str
) -> None:
    stored_agent = {
        "agent_id": "agt_lead", "name": "Lead", "tools": [ref, "Echo"],
        "tool_bindings": [{"tool_id": ref, "config": config}],
    }  # fmt: skip
    factory = _factory(_registry(tmp_path))
    with pytest.raises(ToolNotFoundError) as info:
        factory.resolve_tools(stored_agent)
    factory.executor.close()
    assert says in str(info.value) and "'Lead'" in str(info.value) and ref in str(info.value)
    assert info.value.field == "tools"
