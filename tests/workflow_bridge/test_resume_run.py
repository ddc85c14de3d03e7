"""resume_run: a run paused at a HITL node, recorded in runs.sqlite, carried on from a fresh graph."""

from __future__ import annotations

import pytest

from echo_tools.history import RunHistory
from tests.workflow_bridge._compiler_support import (
    agent,
    agent_tools_registry,
    chain,
    make_executor,
    make_registry,
)
from workflow_bridge.runner import RunResumeError, check_decision, resume_run, run_status, run_workflow


def _gated() -> dict:
    wf, agents = chain(
        agent("a", tools=["Echo"]),
        agent("gate", "HITL", metadata={"hitl_config": {"title": "OK?"}}),
        agent("end", "End", output_schema=["result"]),
    )
    return {"workflow": wf, "agents": agents}


def _pause(tmp_path, run_id: str = "run_gate") -> RunHistory:
    registry = make_registry()
    executor, _ = make_executor(registry)
    history = RunHistory(tmp_path)
    state = run_workflow(
        _gated(), registry=registry, executor=executor, user_input="ship it", run_id=run_id, history=history
    )
    assert "__interrupt__" in state
    return history


def test_a_paused_run_is_recorded_as_interrupted_with_its_source_and_tool_events(tmp_path):
    history = _pause(tmp_path)
    record = history.run("run_gate")
    assert record is not None and record["status"] == "interrupted"
    assert record["source"]["source"] == _gated()
    assert [e.type for e in history.events(run_id="run_gate")].count("tool.completed") == 1
    status = run_status("run_gate", storage=tmp_path)
    assert status["status"] == "interrupted"
    assert status["state"]["__interrupt__"][0]["title"] == "OK?"
    assert status["state"]["run_id"] == "run_gate"


def test_a_paused_run_resumes_from_a_new_history_and_a_new_graph(tmp_path):
    _pause(tmp_path)
    registry = make_registry()
    executor, _ = make_executor(registry)
    events: list[dict] = []
    final = resume_run(
        "run_gate",
        {"decision": "edit", "edits": {"crew_result": "shipped"}},
        storage=tmp_path,
        registry=registry,
        executor=executor,
        on_event=events.append,
    )
    assert final["result"] == "shipped" and "__interrupt__" not in final
    assert events[0]["type"] == "run.resumed" and events[-1]["status"] == "completed"
    assert RunHistory(tmp_path).run("run_gate")["status"] == "completed"  # type: ignore[index]


def test_a_rejected_run_ends_completed_with_the_rejection(tmp_path):
    history = _pause(tmp_path)
    registry = make_registry()
    executor, _ = make_executor(registry)
    final = resume_run("run_gate", "reject", storage=history, registry=registry, executor=executor)
    assert str(final["result"]).startswith("Rejected at 'gate'")


def test_resuming_an_unknown_run_is_a_404_naming_it(tmp_path):
    with pytest.raises(RunResumeError, match="'run_nope'") as caught:
        resume_run("run_nope", "approve", storage=tmp_path)
    assert (caught.value.status, caught.value.field) == (404, "run_id")
    with pytest.raises(RunResumeError, match="'run_nope'"):
        run_status("run_nope", storage=tmp_path)


def test_resuming_a_finished_run_is_a_409_naming_its_status(tmp_path):
    _pause(tmp_path)
    registry = make_registry()
    executor, _ = make_executor(registry)
    resume_run("run_gate", "approve", storage=tmp_path, registry=registry, executor=executor)
    with pytest.raises(RunResumeError, match="'completed'") as caught:
        resume_run("run_gate", "approve", storage=tmp_path, registry=registry, executor=executor)
    assert (caught.value.status, caught.value.field) == (409, "status")


@pytest.mark.parametrize(
    ("decision", "field", "shown"),
    [
        ("maybe", "decision", "'maybe'"),
        ({"decision": "later"}, "decision", "'later'"),
        (42, "decision", "42"),
        ({"decision": "edit"}, "edits", "None"),
        ({"decision": "edit", "edits": "text"}, "edits", "'text'"),
        ({"decision": "approve", "edits": {"a": 1}}, "edits", "'approve'"),
        ({"decision": "approve", "comment": 7}, "comment", "7"),
    ],
)
def test_a_decision_that_does_not_fit_the_node_is_a_422_naming_the_field(decision, field, shown):
    with pytest.raises(RunResumeError) as caught:
        check_decision(decision, "run_x")
    assert (caught.value.status, caught.value.field) == (422, field)
    assert shown in str(caught.value)


def test_a_bad_decision_leaves_the_run_paused(tmp_path):
    _pause(tmp_path)
    with pytest.raises(RunResumeError):
        resume_run("run_gate", "maybe", storage=tmp_path)
    assert RunHistory(tmp_path).run("run_gate")["status"] == "interrupted"  # type: ignore[index]


def test_a_decision_the_node_does_not_allow_is_a_422_naming_the_node(tmp_path):
    wf, agents = chain(
        agent("a", tools=["Echo"]),
        agent("gate", "HITL", metadata={"hitl_config": {"allowEdit": False}}),
        agent("end", "End", output_schema=["result"]),
    )
    registry = make_registry()
    executor, _ = make_executor(registry)
    run_workflow(
        {"workflow": wf, "agents": agents},
        registry=registry,
        executor=executor,
        user_input="x",
        run_id="run_noedit",
        history=RunHistory(tmp_path),
    )
    with pytest.raises(RunResumeError, match="'edit' is not one the HITL node 'gate'") as caught:
        resume_run("run_noedit", {"decision": "edit", "edits": {}}, storage=tmp_path, registry=registry)
    assert (caught.value.status, caught.value.field) == (422, "decision")


def test_compiling_a_canvas_without_workflow_id_twice_gives_the_same_node_names():
    from tests.workflow_bridge._canvas_runs import gated_canvas
    from workflow_bridge.runner import compile_source

    registry = agent_tools_registry()
    executor, _ = make_executor(registry)
    first, _ = compile_source(gated_canvas(), registry, executor)
    second, _ = compile_source(gated_canvas(), registry, executor)
    assert len(first.nodes) == 6  # __start__ and the five canvas nodes
    assert list(first.nodes) == list(second.nodes)


def _pause_canvas(history, run_id: str = "run_canvas"):
    from tests.workflow_bridge._canvas_runs import gated_canvas

    registry = agent_tools_registry()
    executor, _ = make_executor(registry)
    state = run_workflow(gated_canvas(), registry=registry, executor=executor, run_id=run_id, history=history)
    assert "__interrupt__" in state
    return registry


def test_a_paused_canvas_resumed_on_a_fresh_registry_runs_its_second_agent(tmp_path):
    _pause_canvas(RunHistory(tmp_path))
    registry = agent_tools_registry()  # another process: a new registry, executor, graph and history
    executor, log = make_executor(registry)
    final = resume_run("run_canvas", "approve", storage=tmp_path, registry=registry, executor=executor)
    assert [e.input["operation"] for e in log.events if e.type == "tool.invoked"] == ["multiply"]
    assert '"result": 42' in final["crew_result"]
    assert RunHistory(tmp_path).run("run_canvas")["status"] == "completed"  # type: ignore[index]


def test_a_checkpoint_waiting_at_a_node_the_recompiled_graph_lacks_is_a_409_naming_it(tmp_path):
    history = RunHistory(tmp_path)
    _pause_canvas(history)
    record = history.run("run_canvas")
    assert record is not None
    stored = record["source"]
    for node in stored["source"]["canvas_nodes"]:  # the workflow changed since the run paused
        node["id"] = node["id"] * 10
    stored["source"]["connections"] = [{"from": i * 10, "to": (i + 1) * 10} for i in range(1, 5)]
    history.start_run("run_canvas", stored, record["workflow_id"], replace=True)
    history.set_status("run_canvas", "interrupted")
    gate = stored["paused_at"][0]
    registry = agent_tools_registry()
    executor, log = make_executor(registry)
    with pytest.raises(RunResumeError, match=gate) as caught:
        resume_run("run_canvas", "approve", storage=tmp_path, registry=registry, executor=executor)
    assert (caught.value.status, caught.value.field) == (409, "nodes")
    assert "no node" in str(caught.value)
    assert not log.events  # nothing ran, and the run is still paused, not a false `completed`
    assert RunHistory(tmp_path).run("run_canvas")["status"] == "interrupted"  # type: ignore[index]
