"""replay_run: a recorded run runs again under a new run id, its tool calls answered from the recording
(no tool runs), its HITL decisions applied; a recording that no longer matches names the first call."""

from __future__ import annotations

import sqlite3

import pytest

from echo_tools.history import RunHistory
from tests.workflow_bridge._compiler_support import agent, chain, make_executor, make_registry
from workflow_bridge.replay import ReplayMismatchError
from workflow_bridge.runner import RunResumeError, replay_run, resume_run, run_workflow


def _run_to_the_pause(history, run_id: str):  # noqa: ANN001, ANN202
    """Run a gated workflow to its pause, recorded in `history`; the registry and executor it ran with."""
    wf, agents = chain(
        agent("a", tools=["Echo"]),
        agent("gate", "HITL", metadata={"hitl_config": {"title": "OK?"}}),
        agent("end", "End", output_schema=["result"]),
    )
    registry = make_registry()
    executor, _ = make_executor(registry)
    run_workflow(
        {"workflow": wf, "agents": agents},
        registry=registry,
        executor=executor,
        user_input="ship it",
        run_id=run_id,
        history=history,
    )
    return registry, executor


def _recorded(tmp_path) -> None:
    """Run a gated workflow to its pause and resume it with an edit, recording both in tmp_path."""
    history = RunHistory(tmp_path)
    registry, executor = _run_to_the_pause(history, "run_rec")
    resume_run(
        "run_rec",
        {"decision": "edit", "edits": {"crew_result": "shipped"}},
        storage=history,
        registry=registry,
        executor=executor,
    )


def test_a_replay_answers_every_call_from_the_recording_and_applies_the_decision(tmp_path):
    _recorded(tmp_path)
    registry = make_registry()
    executor, log = make_executor(registry)
    events: list[dict] = []
    final = replay_run(
        "run_rec",
        storage=tmp_path,
        new_run_id="run_again",
        registry=registry,
        executor=executor,
        on_event=events.append,
    )
    assert final["result"] == "shipped" and final["run_id"] == "run_again"
    tool_events = [e for e in events if e["type"].startswith("tool.")]
    assert [e["type"] for e in tool_events] == ["tool.invoked", "tool.completed"]
    assert all(e["metadata"]["replayed"] is True and e["run_id"] == "run_again" for e in tool_events)
    recorded = [e for e in RunHistory(tmp_path).events(run_id="run_rec") if e.type == "tool.completed"]
    assert tool_events[1]["output"] == recorded[0].output
    assert log.events == []  # the real executor ran nothing
    assert [e["type"] for e in events if e["type"] == "run.resumed"] == ["run.resumed"]


def test_a_replay_whose_recording_no_longer_matches_names_the_first_call(tmp_path):
    _recorded(tmp_path)
    with sqlite3.connect(tmp_path / "runs.sqlite") as db:  # the recorded call is gone
        db.execute("DELETE FROM events WHERE type LIKE 'tool.%'")
    registry = make_registry()
    executor, log = make_executor(registry)
    with pytest.raises(ReplayMismatchError, match=r"run 'run_rec'.*call 1 \('[^']*echo[^']*'.*not recorded"):
        replay_run("run_rec", storage=tmp_path, registry=registry, executor=executor)
    assert log.events == []


def test_a_replay_of_an_unknown_run_names_it(tmp_path):
    with pytest.raises(RunResumeError, match="'run_nope'") as caught:
        replay_run("run_nope", storage=tmp_path)
    assert (caught.value.status, caught.value.field) == (404, "run_id")


class SlowDiskHistory(RunHistory):
    """A run history whose writer takes its time with each batch, as a busy disk does."""

    def _write_events(self, events):  # noqa: ANN001, ANN202
        import time

        time.sleep(0.2)
        super()._write_events(events)


def test_a_run_s_events_are_written_when_the_run_returns_for_another_process_to_read(tmp_path):
    history = SlowDiskHistory(tmp_path)
    registry, executor = _run_to_the_pause(history, "run_slow")
    other = RunHistory(tmp_path)  # another reader of the same folder, as another process is
    assert [e.type for e in other.events(run_id="run_slow") if e.type.startswith("tool.")] == [
        "tool.invoked",
        "tool.completed",
    ]
    resume_run("run_slow", {"decision": "approve"}, storage=history, registry=registry, executor=executor)
    assert any(e.type == "run.resumed" for e in RunHistory(tmp_path).events(run_id="run_slow"))
