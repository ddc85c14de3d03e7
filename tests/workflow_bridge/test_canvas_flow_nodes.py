"""Loop, Map, Template, Failsafe and Self-Review nodes (and a Subworkflow Deployment tool entry) survive the
canvas round trip: saved, reopened through `to_canvas` and saved again, each node keeps its config, and the
IDE's own default config of each type maps and compiles."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from echo_tools.stores import AgentStore, WorkflowStore
from tests.workflow_bridge._mapper_support import canvas, node, without_timestamps
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.node_mapper import NodeMapper

# the IDE's nodeLibrary defaults (workflow_builder_ide.html), plus what its inspector sets
CONFIGS: dict[str, dict[str, Any]] = {
    "Loop": {"loopType": "for-each", "arrayVariable": "items", "itemVariable": "item", "maxIterations": 100},
    "Map": {"operation": "", "maxConcurrency": 5, "arrayVariable": "results"},
    "Template": {"template": "{% for r in previous %}{{ r }} {% endfor %}", "engine": "jinja2"},
    "Failsafe": {"retryAttempts": 3, "timeout": 30},
    "Self-Review": {
        "checkCompleteness": True,
        "checkAccuracy": True,
        "checkTone": False,
        "confidenceThreshold": 0.8,
        "maxIterations": 3,
    },
}


def _payload() -> dict[str, Any]:
    deployment = {"id": 70, "name": "Child", "type": "subworkflow_deployment", "enabled": True,
                  "config": {"deploymentId": "dep_child", "environment": "production"}}  # fmt: skip
    nodes = [
        node(1, "Start", inputVariables=[{"name": "items", "type": "array"}]),
        node(2, "Loop", "Each item", **CONFIGS["Loop"]),
        node(3, "Agent", "Worker", prompt="work on the item", tools=[deployment]),
        node(4, "Map", "Each result", **CONFIGS["Map"]),
        node(5, "Failsafe", "Guard", **CONFIGS["Failsafe"]),
        node(6, "Agent", "Checker", prompt="check it"),
        node(10, "Agent", "Reporter", prompt="report"),
        node(7, "Self-Review", "Review", **CONFIGS["Self-Review"]),
        node(8, "Template", "Report", **CONFIGS["Template"]),
        node(9, "End", outputVariables=[{"name": "result", "type": "string"}]),
    ]
    edges = [(1, 2), (2, 3), (3, 2), (2, 4), (4, 6), (6, 5), (5, 10), (10, 7), (7, 8), (8, 9)]
    return canvas(nodes, edges, workflow_id="wf_flow_round_trip", metadata={"default_input": "go"})


def _registry(tmp_path: Path) -> ToolRegistry:
    workflows, agents = WorkflowStore(tmp_path / "wf"), AgentStore(tmp_path / "agents")
    child = NodeMapper(None).map_canvas(
        canvas([node(1, "Start"), node(2, "End")], [(1, 2)], workflow_id="wf_child")
    )
    workflows.save({**child.workflow, "version": "1", "status": "final"}, "final")
    for agent in child.agents.values():
        agents.save(agent)
    workflows.deploy("dep_child", "wf_child", "1")
    return ToolRegistry(workflows=workflows, agents=agents)


def test_each_flow_node_keeps_its_config_through_save_reopen_and_save_again(tmp_path):
    mapper = NodeMapper(_registry(tmp_path))
    first = mapper.map_canvas(_payload())
    assert first.ok and first.diagnostics == [], first.diagnostics
    reopened = mapper.to_canvas(first.workflow, first.agents)
    by_name = {n["name"]: n for n in reopened["canvas_nodes"]}
    for name, kind in (("Each item", "Loop"), ("Each result", "Map"), ("Guard", "Failsafe"),
                       ("Review", "Self-Review"), ("Report", "Template")):  # fmt: skip
        config = by_name[name]["config"]
        assert {k: config[k] for k in CONFIGS[kind]} == CONFIGS[kind], name
    (entry,) = by_name["Worker"]["config"]["tools"]
    assert entry["type"] == "subworkflow_deployment"
    assert entry["config"] == {"deploymentId": "dep_child", "environment": "production"}
    again = mapper.map_canvas(reopened)
    assert again.diagnostics == []
    assert without_timestamps(again.agents) == without_timestamps(first.agents)
    assert again.workflow["connections"] == first.workflow["connections"]


def test_the_round_tripped_canvas_compiles_with_its_loop_as_a_cycle(tmp_path):
    registry = _registry(tmp_path)
    mapper = NodeMapper(registry)
    first = mapper.map_canvas(_payload())
    again = mapper.map_canvas(mapper.to_canvas(first.workflow, first.agents))
    graph = WorkflowCompiler(registry, ToolExecutor(registry)).compile(again.workflow, again.agents)
    ids = {a["name"]: i for i, a in again.agents.items()}
    edges = {(e.source, e.target) for e in graph.get_graph().edges}
    assert (ids["Worker"], ids["Each item"]) in edges  # the body leads back to its Loop
    assert (ids["Each item"], ids["Worker"]) in edges and (ids["Each item"], ids["Each result"]) in edges
    assert (ids["Checker"], ids["Each result"]) in edges  # each item's run goes back to the Map
    assert (ids["Review"], ids["Reporter"]) in edges  # the Self-Review can send its node round again


def test_saving_a_canvas_reports_flow_config_that_cannot_run_naming_the_canvas_node():
    payload = canvas(
        [
            node(1, "Start", inputVariables=[{"name": "items", "type": "string"}]),
            node(2, "Loop", "Each item", loopType="for-each", arrayVariable="items", maxIterations=5),
            node(3, "Agent", "Worker", prompt="work"),
            node(4, "Failsafe", "Guard", retryAttempts="many"),
            node(5, "Template", "Note", template="{{ ticket_id }} done", engine="jinja2"),
            node(6, "End"),
        ],
        [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6)],
    )
    mapped = NodeMapper(None).map_canvas(payload)
    found = {(d.level, d.node_id, d.field) for d in mapped.diagnostics}
    assert ("error", "2", "config.arrayVariable") in found  # declared as a string
    assert ("error", "4", "config.retryAttempts") in found
    assert ("warning", "5", "config.template") in found  # a run's input may still bring ticket_id
    (loop_error,) = [d for d in mapped.errors if d.node_id == "2"]
    assert "Loop node 'Each item' (canvas id 2" in loop_error.message and "'string'" in loop_error.message
