"""The sample workflows map cleanly against the real AgentTools, and their inputs fit the tools' schemas."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from echo_tools.registry import ToolRegistry
from tests.workflow_bridge._mapper_support import without_timestamps
from workflow_bridge.node_mapper import MappedWorkflow, NodeMapper

SAMPLES = ("code_pipeline.canvas.json", "research_report.canvas.json", "api_conditional.canvas.json")


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    root = Path(__file__).resolve().parents[2]
    registry = ToolRegistry(discovery_dirs=[root / "AgentTools"])
    registry.discover_local_tools()
    assert registry.problems() == []
    return registry


def _load(repo_root: Path, name: str) -> dict:
    return json.loads((repo_root / "sample_workflows" / name).read_text(encoding="utf-8"))


def _map(registry: ToolRegistry, repo_root: Path, name: str) -> MappedWorkflow:
    return NodeMapper(registry).map_canvas(_load(repo_root, name))


def _tools_by_agent(mapped: MappedWorkflow) -> dict[str, list[str]]:
    return {a["name"]: a["tools"] for a in mapped.agents.values() if a["metadata"]["node_type"] == "Agent"}


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_maps_with_no_diagnostics(registry: ToolRegistry, repo_root: Path, name: str) -> None:
    mapped = _map(registry, repo_root, name)
    assert mapped.diagnostics == []
    assert mapped.workflow["metadata"]["default_input"]
    assert mapped.workflow_id == _load(repo_root, name)["workflow_id"]  # stable agent ids across runs


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_validates_against_echoais_schemas(
    registry: ToolRegistry, repo_root: Path, corpus: Path, name: str
) -> None:
    mapped = _map(registry, repo_root, name)
    workflow_schema = json.loads((corpus / "schemas" / "workflow_schema.json").read_text(encoding="utf-8"))
    agent_schema = json.loads((corpus / "schemas" / "agent_schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(workflow_schema).validate(mapped.workflow)
    for agent in mapped.agents.values():
        jsonschema.Draft7Validator(agent_schema).validate(agent)


def test_the_code_pipeline_binds_one_code_tool_per_agent_in_order(
    registry: ToolRegistry, repo_root: Path
) -> None:
    mapped = _map(registry, repo_root, "code_pipeline.canvas.json")
    assert mapped.workflow["execution_model"] == "sequential"
    assert _tools_by_agent(mapped) == {
        "Code Executor": ["tool_code_executor"],
        "Code Reviewer": ["tool_code_reviewer"],
        "Code Tester": ["tool_code_tester"],
    }
    names = [mapped.agents[a]["name"] for a in mapped.workflow["agents"]]
    assert names == ["Code Submitted", "Code Executor", "Code Reviewer", "Code Tester", "Report Ready"]


def test_the_code_pipeline_input_fits_the_tools_schemas(registry: ToolRegistry, repo_root: Path) -> None:
    text = _map(registry, repo_root, "code_pipeline.canvas.json").workflow["metadata"]["default_input"]
    code = re.search(r"```python\n(.*?)```", text, re.S)
    assert code is not None
    compile(code.group(1), "<sample>", "exec")  # the block is valid Python
    cases = json.loads(text[text.index("{", code.end()) :])
    tester = registry.require("tool_code_tester")
    assert registry.input_errors(tester.tool_id, {"code": code.group(1), **cases}) == []
    assert {case["function"] for case in cases["test_cases"]} == {"fizzbuzz"}
    executor = registry.require("tool_code_executor")
    assert set(cases).isdisjoint(executor.input_schema["properties"])  # the rehearsal gives it only the code


def test_the_research_report_fans_out_and_fixes_local_sources(
    registry: ToolRegistry, repo_root: Path
) -> None:
    mapped = _map(registry, repo_root, "research_report.canvas.json")
    assert mapped.workflow["execution_model"] == "parallel"
    assert _tools_by_agent(mapped) == {
        "Web Researcher": ["tool_web_search"],
        "Notes Reader": ["tool_file_reader"],
        "Analyst": ["tool_calculator"],
    }
    reader = next(a for a in mapped.agents.values() if a["name"] == "Notes Reader")
    fixed = reader["tool_bindings"][0]["fixed"]
    assert (repo_root / fixed["path"]).is_file()
    web = next(a for a in mapped.agents.values() if a["name"] == "Web Researcher")
    assert web["tool_bindings"][0]["fixed"], "the web search provider is fixed to the local server"
    text = mapped.workflow["metadata"]["default_input"]
    numbers = json.loads(text[text.index("{") :])
    assert registry.input_errors("tool_calculator", numbers) == []


def test_the_api_sample_routes_on_the_api_result(registry: ToolRegistry, repo_root: Path) -> None:
    mapped = _map(registry, repo_root, "api_conditional.canvas.json")
    agents = {a["name"]: a for a in mapped.agents.values()}
    api = agents["Fetch Risk Score"]
    assert api["output_schema"] == ["risk_score"]
    assert api["metadata"]["api_config"]["url"].startswith("http://127.0.0.1:")
    branches = agents["High Risk?"]["metadata"]["branches"]
    assert [(b["type"], b["targetNodeId"]) for b in branches] == [
        ("if", agents["Escalation Writer"]["agent_id"]),
        ("else", agents["Approval Writer"]["agent_id"]),
    ]
    assert mapped.workflow["state_schema"]["risk_score"] == "number"
    risk = json.loads((repo_root / "sample_workflows" / "data" / "risk.json").read_text(encoding="utf-8"))
    assert risk["risk_score"] > 70 and next(iter(risk)) == "risk_score"  # first number in the text


def test_the_workflow_json_sample_is_the_mapped_code_pipeline(
    registry: ToolRegistry, repo_root: Path
) -> None:
    mapped = _map(registry, repo_root, "code_pipeline.canvas.json")
    stored = _load(repo_root, "code_pipeline.workflow.json")
    assert without_timestamps(stored["agents"]) == without_timestamps(mapped.agents)
    ours = {k: v for k, v in mapped.workflow.items() if k != "metadata"}
    assert {k: v for k, v in stored["workflow"].items() if k != "metadata"} == ours
    assert stored["workflow"]["metadata"]["default_input"] == mapped.workflow["metadata"]["default_input"]


def test_a_sample_survives_the_round_trip_through_the_canvas(registry: ToolRegistry, repo_root: Path) -> None:
    mapper = NodeMapper(registry)
    for name in SAMPLES:
        first = mapper.map_canvas(_load(repo_root, name))
        again = mapper.map_canvas(mapper.to_canvas(first.workflow, first.agents))
        assert again.diagnostics == []
        assert without_timestamps(again.agents) == without_timestamps(first.agents), name
        assert again.workflow["metadata"]["default_input"] == first.workflow["metadata"]["default_input"]
