"""Every corpus workflow and canvas compiles; the web search workflow (all agents present) runs.

Each test runs on our fixtures in EchoAI's formats and on the real EchoAI corpus when it is here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import Corpus, corpus_cases
from tests.workflow_bridge._compiler_support import agent_tools_registry, make_executor
from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler
from workflow_bridge.node_mapper import NodeMapper
from workflow_bridge.runner import compile_source, run_workflow

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_workflows").glob("*.json"))


def corpus_agents(corpus: Corpus) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in (corpus / "agents").glob("agt_*.json")}


def corpus_workflows(corpus: Corpus) -> list[Path]:
    return sorted((corpus / "workflows").glob("*/*.json"))


@pytest.fixture(scope="module")
def registry():
    return agent_tools_registry()


def test_every_corpus_workflow_compiles_with_missing_agents_as_passthrough(corpus, registry):
    executor, _ = make_executor(registry)
    agents = corpus_agents(corpus)
    paths = corpus_workflows(corpus)
    assert len(paths) == corpus.workflow_count
    for path in paths:
        workflow = json.loads(path.read_text())
        graph = WorkflowCompiler(registry, executor, missing_agents="passthrough").compile(workflow, agents)
        nodes = set(graph.get_graph().nodes)
        assert set(workflow["agents"]) <= nodes, path.name


def _branching_workflow(corpus: Corpus) -> dict:
    return json.loads((corpus / f"workflows/draft/{corpus.branching_workflow}.draft.json").read_text())


def test_a_corpus_workflow_with_missing_agents_fails_listing_them(corpus, registry):
    executor, _ = make_executor(registry)
    workflow = _branching_workflow(corpus)
    with pytest.raises(WorkflowCompileError) as info:
        WorkflowCompiler(registry, executor).compile(workflow, corpus_agents(corpus))
    assert corpus.branching_missing_agent in str(info.value)
    assert corpus.branching_present_agent not in str(info.value)  # present in the corpus


def test_a_conditional_maps_canvas_int_targets_to_its_successors(corpus, registry):
    executor, _ = make_executor(registry)
    workflow = _branching_workflow(corpus)
    graph = WorkflowCompiler(registry, executor, missing_agents="passthrough").compile(
        workflow, corpus_agents(corpus)
    )
    targets = {e.target for e in graph.get_graph().edges if e.source == corpus.branching_conditional}
    assert corpus.branching_targets <= targets


@pytest.mark.parametrize(("corpus", "name"), corpus_cases(lambda c: c.canvases), indirect=["corpus"])
def test_every_corpus_canvas_maps_and_compiles(corpus, registry, name):
    executor, _ = make_executor(registry)
    mapped = NodeMapper(registry).map_canvas(json.loads((corpus / "canvases" / f"{name}.json").read_text()))
    assert mapped.ok, mapped.errors
    graph = WorkflowCompiler(registry, executor).compile(mapped.workflow, mapped.agents)
    assert set(mapped.agents) <= set(graph.get_graph().nodes)


@pytest.mark.parametrize("path", SAMPLES, ids=[p.stem for p in SAMPLES])
def test_every_sample_workflow_compiles(registry, path):
    executor, _ = make_executor(registry)
    graph, mapped = compile_source(path, registry, executor)
    assert set(mapped.agents) <= set(graph.get_graph().nodes)


def test_the_web_search_workflow_runs_with_its_tool_called_by_the_search_agent(corpus, registry, monkeypatch):
    from AgentTools.web_search.local_server import running_local_search
    from echo_tools.egress import EgressPolicy
    from echo_tools.executor import ToolExecutor

    workflow = json.loads((corpus / f"workflows/draft/{corpus.web_search_workflow}.draft.json").read_text())
    agents = {a: corpus_agents(corpus)[a] for a in workflow["agents"]}
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    with running_local_search() as server:
        monkeypatch.setenv("ECHO_WEB_SEARCH_PROVIDER", "searxng")
        monkeypatch.setenv("ECHO_SEARXNG_URL", server.url)
        state = run_workflow(
            {"workflow": workflow, "agents": agents},
            registry=registry,
            executor=executor,
            user_input="langgraph state reducers",
            run_id="run_websearch",
        )
    done = [e for e in state["tool_events"] if e["type"] == "tool.completed"]
    assert [(e["tool_id"], e["agent_id"]) for e in done] == [("tool_web_search", corpus.web_search_agent)]
    assert done[0]["output"]["results"], "the local search server returned results"
    assert state["query"] == "langgraph state reducers"  # Start filled its input key
    assert state["result"] == state["crew_result"] and "web_search returned" in state["result"]
    assert [m["agent"] for m in state["messages"]] == workflow["agents"]
