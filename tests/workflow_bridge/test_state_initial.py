"""EchoAI's runtime call `initial_state(user_input, workflow_id, run_id, **payload)` with payloads that
carry `workflow_id` and `run_id` as metadata (issue 17.4)."""

from __future__ import annotations

from workflow_bridge.state import initial_state


def test_a_payload_holding_workflow_id_and_run_id_is_accepted_and_the_arguments_win():
    payload = {"message": "find deals", "workflow_id": "wf_meta", "run_id": "run_meta", "region": "EU"}
    state = initial_state(None, "wf_1", "run_1", **payload)
    assert (state["workflow_id"], state["run_id"]) == ("wf_1", "run_1")
    assert state["user_input"] == "find deals" and state["region"] == "EU"


def test_the_payloads_ids_are_used_when_the_arguments_are_none():
    state = initial_state("go", None, None, workflow_id="wf_meta", run_id="run_meta")
    assert (state["workflow_id"], state["run_id"]) == ("wf_meta", "run_meta")
    assert state["user_input"] == "go"


def test_keyword_callers_keep_working():
    state = initial_state(user_input="hello", workflow_id="wf_k", run_id="run_k")
    assert (state["user_input"], state["workflow_id"], state["run_id"]) == ("hello", "wf_k", "run_k")
    assert state["original_user_input"] == state["task_description"] == "hello"
