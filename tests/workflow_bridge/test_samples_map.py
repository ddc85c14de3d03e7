"""The sample workflows map cleanly against the real AgentTools, and their inputs fit the tools' schemas."""

from __future__ import annotations

import functools
import json
import re
import threading
import warnings
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jsonschema
import pytest

from AgentTools.web_search.local_server import running_local_search
from echo_tools.egress import EgressPolicy
from echo_tools.events import MemoryEventLog
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from tests.conftest import Corpus
from tests.workflow_bridge._mapper_support import without_timestamps
from workflow_bridge.node_mapper import MappedWorkflow, NodeMapper

# crewai 1.15's own import (through the runner) trips an ImportWarning (crewai.rag refuses the attribute for
# its child module 'embeddings'), which filterwarnings=error would turn into a collection error.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from workflow_bridge.runner import run_workflow

SAMPLES = (
    "code_pipeline.canvas.json",
    "research_report.canvas.json",
    "api_conditional.canvas.json",
    "local_model.canvas.json",
    # one per node type that shapes a run (their runs: test_samples_flow_nodes.py)
    "loop.canvas.json",
    "map.canvas.json",
    "template.canvas.json",
    "failsafe.canvas.json",
    "self_review.canvas.json",
)


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
    registry: ToolRegistry, repo_root: Path, corpus: Corpus, name: str
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
    assert mapped.workflow["execution_model"] == "hybrid"
    agents = {a["name"]: a for a in mapped.agents.values()}
    assert agents["Fetch Risk Score"]["metadata"]["api_config"]["url"].startswith("http://127.0.0.1:")
    extract = agents["Extract Score"]
    assert extract["output_schema"] == ["risk_score"]
    compile(extract["metadata"]["code_config"]["code"], "<extract>", "exec")
    branches = agents["High Risk?"]["metadata"]["branches"]
    assert [(b["type"], b["targetNodeId"]) for b in branches] == [
        ("if", agents["Escalation Writer"]["agent_id"]),
        ("else", agents["Approval Writer"]["agent_id"]),
    ]
    assert mapped.workflow["state_schema"]["risk_score"] == "number"
    risk = json.loads((repo_root / "sample_workflows" / "data" / "risk.json").read_text(encoding="utf-8"))
    assert risk["risk_score"] > 70


def test_the_workflow_json_sample_is_the_mapped_code_pipeline(
    registry: ToolRegistry, repo_root: Path
) -> None:
    mapped = _map(registry, repo_root, "code_pipeline.canvas.json")
    stored = _load(repo_root, "code_pipeline.workflow.json")
    assert without_timestamps(stored["agents"]) == without_timestamps(mapped.agents)
    # the description carries the day of the save ("Created from canvas on <date>"), as EchoAI's does
    dated = ("metadata", "description")
    ours = {k: v for k, v in mapped.workflow.items() if k not in dated}
    assert {k: v for k, v in stored["workflow"].items() if k not in dated} == ours
    assert stored["workflow"]["metadata"]["default_input"] == mapped.workflow["metadata"]["default_input"]


def test_a_sample_survives_the_round_trip_through_the_canvas(registry: ToolRegistry, repo_root: Path) -> None:
    mapper = NodeMapper(registry)
    for name in SAMPLES:
        first = mapper.map_canvas(_load(repo_root, name))
        again = mapper.map_canvas(mapper.to_canvas(first.workflow, first.agents))
        assert again.diagnostics == []
        assert without_timestamps(again.agents) == without_timestamps(first.agents), name
        assert again.workflow["metadata"]["default_input"] == first.workflow["metadata"]["default_input"]


# -- the samples run (offline rehearsal model, real tools, real local servers) ---------------------------


@pytest.fixture
def risk_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real HTTP server on 127.0.0.1 serving files from `tmp_path` (the sample's risk service)."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass  # keep the test output clean

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(tmp_path)))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", tmp_path
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _run(registry: ToolRegistry, payload: dict, run_id: str) -> tuple[dict, MemoryEventLog]:
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log], egress=EgressPolicy.local())
    try:
        state = run_workflow(payload, registry=registry, executor=executor, llm="rehearsal", run_id=run_id)
    finally:
        executor.close()
    return state, log


@pytest.mark.parametrize(
    ("score", "taken", "skipped"), [(82, "Escalation", "Approval"), (40, "Approval", "Escalation")]
)
def test_the_api_sample_takes_the_branch_the_served_score_picks(
    registry: ToolRegistry,
    repo_root: Path,
    risk_server: tuple[str, Path],
    monkeypatch: pytest.MonkeyPatch,
    score: int,
    taken: str,
    skipped: str,
) -> None:
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")  # the http_request tool's own policy
    base, folder = risk_server
    risk = json.loads((repo_root / "sample_workflows" / "data" / "risk.json").read_text(encoding="utf-8"))
    (folder / "risk.json").write_text(json.dumps({**risk, "risk_score": score}), encoding="utf-8")
    payload = _load(repo_root, "api_conditional.canvas.json")
    api = next(n for n in payload["canvas_nodes"] if n["type"] == "API")
    api["config"]["url"] = f"{base}/risk.json"

    state, log = _run(registry, payload, f"run_api_{score}")

    ran = [m.get("name") for m in state["messages"]]
    assert f"{taken} Writer" in ran and f"{skipped} Writer" not in ran
    completed = [e.tool_id for e in log.events if e.type == "tool.completed"]
    assert completed == ["tool_http_request", "tool_code_executor"]
    extract = next(e for e in log.events if e.type == "tool.completed" and e.tool_id == "tool_code_executor")
    assert extract.output["stdout"].strip() == str(score)


def test_the_research_sample_runs_its_three_tools_on_local_sources(
    registry: ToolRegistry, repo_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo_root)  # the file reader's fixed path is relative to the repository
    monkeypatch.setenv("ECHO_TOOLS_FILE_ROOTS", str(repo_root / "sample_workflows" / "data"))
    with running_local_search() as search:
        monkeypatch.setenv("ECHO_SEARXNG_URL", search.url)
        mapped = _map(registry, repo_root, "research_report.canvas.json")
        state, log = _run(registry, _load(repo_root, "research_report.canvas.json"), "run_research")
        assert len(search.requests) == 1
    by_agent = {e.agent_id: e for e in log.events if e.type == "tool.completed"}
    names = {a["agent_id"]: a["name"] for a in mapped.agents.values()}
    assert {names[a]: e.tool_id for a, e in by_agent.items()} == {
        "Web Researcher": "tool_web_search",
        "Notes Reader": "tool_file_reader",
        "Analyst": "tool_calculator",
    }
    assert [e for e in log.events if e.type in ("tool.failed", "tool.timeout")] == []
    calculator = next(e for e in by_agent.values() if e.tool_id == "tool_calculator")
    assert calculator.output["result"] == 12.1  # mean of 12.5, 14.1, 9.8 at precision 1
    invoked = next(e for e in log.events if e.type == "tool.invoked" and e.tool_id == "tool_web_search")
    assert (invoked.input["provider"], invoked.input["max_results"]) == ("searxng", 5)  # the fixed values
    assert "calculator returned" in state["crew_result"]
