"""The state contract: EchoAI's keys all declared, reducers that append, merge and accept parallel writes."""

from __future__ import annotations

import operator
import typing

from tests.workflow_bridge._compiler_support import agent, workflow
from workflow_bridge.state import BASE_KEYS, build_state_schema, initial_state, merge_dicts, user_request


def test_every_key_echoai_reads_or_writes_is_declared():
    wf, agents = workflow(
        [agent("s", "Start", input_schema=["query"]), agent("e", "End", output_schema=["result", "summary"])],
        [("s", "e")],
        state_schema={"query": "string", "deal_size": "number"},
    )
    hints = typing.get_type_hints(build_state_schema(wf, agents), include_extras=True)
    for key in (
        "run_id",
        "workflow_id",
        "tool_events",
        "crew_result",
        "original_user_input",
        "user_input",
        "task_description",
        "messages",
        "parallel_output",
        "individual_outputs",
        "hierarchical_output",
        "_conditional_route",
        "query",
        "summary",
        "deal_size",
        "result",
    ):
        assert key in hints, key
    assert set(BASE_KEYS) <= set(hints)


def test_messages_and_tool_events_append_and_branch_outputs_merge():
    hints = typing.get_type_hints(build_state_schema({}, {}), include_extras=True)
    append = hints["messages"].__metadata__[0]
    assert append([{"a": 1}], [{"b": 2}]) == [{"a": 1}, {"b": 2}] == operator.add([{"a": 1}], [{"b": 2}])
    assert hints["tool_events"].__metadata__[0] is append
    assert hints["parallel_output"].__metadata__[0] is merge_dicts
    assert merge_dicts({"A": "x"}, {"B": "y"}) == {"A": "x", "B": "y"}
    assert merge_dicts({"A": "x"}, "combined") == "combined"


def test_initial_state_is_built_as_echoais_runtime_builds_it():
    state = initial_state("find deals", "wf_1", "run_1", context={"k": 1})
    assert state["user_input"] == state["original_user_input"] == state["task_description"] == "find deals"
    assert (state["workflow_id"], state["run_id"], state["messages"], state["tool_events"]) == (
        "wf_1",
        "run_1",
        [],
        [],
    )
    assert state["context"] == {"k": 1}


def test_the_request_is_found_in_a_payload_as_echoai_finds_it():
    assert user_request({"message": "hi", "context": {}}) == "hi"
    assert user_request({"question": "why?"}) == "why?"
    assert user_request({"run_id": "r", "deal": 5}) == '{"deal": 5}'
    assert user_request({"run_id": "r"}) == ""
    assert initial_state(None, "wf", "run", prompt="draft")["user_input"] == "draft"
