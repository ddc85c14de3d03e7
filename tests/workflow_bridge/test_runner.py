"""run_workflow / compile_source: sources of every shape, live progress events, the main sample end to end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.workflow_bridge._compiler_support import (
    agent,
    agent_tools_registry,
    chain,
    make_executor,
    make_registry,
)
from workflow_bridge.runner import WorkflowSourceError, compile_source, run_workflow, uses_rehearsal

ROOT = Path(__file__).resolve().parents[2]
MAIN_SAMPLE = ROOT / "sample_workflows" / "code_pipeline.canvas.json"


@pytest.fixture(scope="module")
def agent_tools():
    return agent_tools_registry()


def test_the_main_sample_runs_offline_and_each_agent_completes_its_tool(agent_tools):
    executor, log = make_executor(agent_tools)
    events: list[dict] = []
    state = run_workflow(
        MAIN_SAMPLE, registry=agent_tools, executor=executor, on_event=events.append, run_id="run_main"
    )

    graph, mapped = compile_source(MAIN_SAMPLE, agent_tools, executor)
    by_name = {a["name"]: agent_id for agent_id, a in mapped.agents.items()}
    done = [(e["tool_id"], e["agent_id"]) for e in state["tool_events"] if e["type"] == "tool.completed"]
    assert done == [
        ("tool_code_executor", by_name["Code Executor"]),
        ("tool_code_reviewer", by_name["Code Reviewer"]),
        ("tool_code_tester", by_name["Code Tester"]),
    ]
    assert not [
        e for e in state["tool_events"] if e["type"] != "tool.completed" and e["type"] != "tool.invoked"
    ]
    tester = [e for e in log.events if e.type == "tool.completed" and e.tool_id == "tool_code_tester"][0]
    assert tester.output["success"] is True and tester.output["failed"] == 0
    assert "code_tester returned" in state["crew_result"] and state["result"] == state["crew_result"]
    assert uses_rehearsal(graph)


def test_progress_events_arrive_in_order_with_tools_inside_their_node(agent_tools):
    executor, _ = make_executor(agent_tools)
    events: list[dict] = []
    run_workflow(
        MAIN_SAMPLE, registry=agent_tools, executor=executor, on_event=events.append, run_id="run_events"
    )
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["run.started", "llm.rehearsal"] and kinds[-1] == "run.finished"
    assert all(e["run_id"] == "run_events" for e in events)
    started = kinds.index("node.started", kinds.index("node.finished"))  # the second node: Code Executor
    invoked = kinds.index("tool.invoked")
    finished = kinds.index("node.finished", invoked)
    assert started < invoked < kinds.index("tool.completed") < finished
    assert events[started]["name"] == "Code Executor" and events[invoked]["tool_id"] == "tool_code_executor"


def test_a_workflow_and_agents_pair_and_a_json_file_are_accepted(tmp_path):
    registry = make_registry()
    executor, _ = make_executor(registry)
    wf, agents = chain(agent("a", tools=["Echo"]))
    path = tmp_path / "wf.json"
    path.write_text(json.dumps({"workflow": wf, "agents": list(agents.values())}))
    for source in ({"workflow": wf, "agents": agents}, path, str(path)):
        state = run_workflow(source, registry=registry, executor=executor, user_input="hi", llm="rehearsal")
        assert "echo: hi" in state["crew_result"]


def test_a_canvas_with_errors_is_refused_with_its_diagnostics_listed():
    registry = make_registry()
    executor, _ = make_executor(registry)
    canvas = {
        "canvas_nodes": [
            {"id": 1, "type": "Start", "name": "Start", "config": {}},
            {"id": 2, "type": "Agent", "name": "Fetcher", "config": {"tools": ["Web Fetch"]}},
        ],
        "connections": [{"from": 1, "to": 2}],
        "workflow_name": "Broken",
    }
    with pytest.raises(WorkflowSourceError) as info:
        compile_source(canvas, registry, executor)
    assert "Web Fetch" in str(info.value)
    assert any(d.level == "error" for d in info.value.diagnostics)


def test_unrecognised_and_unreadable_sources_name_the_problem(tmp_path):
    registry = make_registry()
    executor, _ = make_executor(registry)
    with pytest.raises(WorkflowSourceError, match="unrecognised workflow source"):
        compile_source({"hello": 1}, registry, executor)
    with pytest.raises(WorkflowSourceError, match="without its agent JSONs"):
        compile_source({"agents": ["a"], "connections": []}, registry, executor)
    with pytest.raises(WorkflowSourceError, match="missing.json"):
        compile_source(tmp_path / "missing.json", registry, executor)


def test_a_paused_run_reports_its_interrupt():
    registry = make_registry()
    executor, _ = make_executor(registry)
    wf, agents = chain(
        agent("a", tools=["Echo"]), agent("gate", "HITL", metadata={"hitl_config": {"title": "OK?"}})
    )
    events: list[dict] = []
    state = run_workflow(
        {"workflow": wf, "agents": agents},
        registry=registry,
        executor=executor,
        user_input="x",
        on_event=events.append,
    )
    assert state["__interrupt__"][0].value["title"] == "OK?"
    assert [e["type"] for e in events][-2:] == ["run.interrupted", "run.finished"]
    assert events[-1]["status"] == "interrupted"


def test_a_paused_run_resumes_on_the_same_graph_with_the_decision():
    from workflow_bridge.runner import resume_workflow, stream_run
    from workflow_bridge.state import initial_state

    registry = make_registry()
    executor, _ = make_executor(registry)
    wf, agents = chain(
        agent("a", tools=["Echo"]),
        agent("gate", "HITL", metadata={"hitl_config": {"title": "OK?"}}),
        agent("end", "End", output_schema=["result"]),
    )
    graph, _ = compile_source({"workflow": wf, "agents": agents}, registry, executor)
    paused = stream_run(
        graph, initial_state("ship it", "wf_test", "run_resume"), "run_resume", executor=executor
    )
    assert "__interrupt__" in paused
    events: list[dict] = []
    final = resume_workflow(
        graph,
        "run_resume",
        {"decision": "edit", "edited_output": "shipped"},
        executor=executor,
        on_event=events.append,
    )
    assert final["result"] == "shipped" and "__interrupt__" not in final
    assert events[0] == {
        "type": "run.resumed",
        "run_id": "run_resume",
        "decision": {"decision": "edit", "edited_output": "shipped"},
    }
    assert events[-1]["status"] == "completed"
