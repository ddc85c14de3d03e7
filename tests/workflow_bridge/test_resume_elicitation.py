"""resume_run of a run paused at an MCP server's question (elicitation): the person's answer goes back
to the server from a fresh graph and process state, and answers that cannot fit are 422s naming the field."""

from __future__ import annotations

import json

import pytest

from echo_tools.history import RunHistory
from tests.echo_tools._mcp_support import SERVERS, stdio_config
from tests.workflow_bridge._compiler_support import agent, chain, make_executor, make_registry
from workflow_bridge.runner import RunResumeError, resume_run, run_status, run_workflow


def _source() -> dict:
    wf, agents = chain(
        agent("clerk", tools=["asking_ask_contact"]), agent("end", "End", output_schema=["result"])
    )
    return {"workflow": wf, "agents": agents}


def _parts():
    registry = make_registry()
    registry.add_mcp_server("asking", stdio_config(SERVERS / "asking_server.py"))
    executor, log = make_executor(registry)
    return registry, executor, log


def _paused(tmp_path) -> None:
    registry, executor, _ = _parts()
    try:
        state = run_workflow(
            _source(),
            registry=registry,
            executor=executor,
            user_input="register me",
            run_id="run_ask",
            history=RunHistory(tmp_path),
        )
    finally:
        executor.close()
    (request,) = state["__interrupt__"]
    assert getattr(request, "value", request)["type"] == "mcp_elicitation"
    status = run_status("run_ask", storage=tmp_path)
    assert status["status"] == "interrupted"
    assert status["state"]["__interrupt__"][0]["schema"]["required"] == ["name"]


def test_an_answer_resumes_the_run_and_reaches_the_server(tmp_path):
    _paused(tmp_path)
    registry, executor, log = _parts()
    try:
        final = resume_run(
            "run_ask",
            {"decision": "accept", "content": {"name": "Ada", "age": 36}},
            storage=tmp_path,
            registry=registry,
            executor=executor,
        )
    finally:
        executor.close()
    done = [e for e in log.events if e.type == "tool.completed" and e.tool_id == "mcp_asking_ask_contact"]
    assert [json.loads(e.output["result"]) for e in done] == [
        {"action": "accept", "content": {"name": "Ada", "age": 36}}
    ]
    assert "__interrupt__" not in final
    assert RunHistory(tmp_path).run("run_ask")["status"] == "completed"  # type: ignore[index]


def test_a_declined_question_resumes_the_run_with_the_decline(tmp_path):
    _paused(tmp_path)
    registry, executor, log = _parts()
    try:
        resume_run("run_ask", "decline", storage=tmp_path, registry=registry, executor=executor)
    finally:
        executor.close()
    done = [e for e in log.events if e.type == "tool.completed" and e.tool_id == "mcp_asking_ask_contact"]
    assert [json.loads(e.output["result"])["action"] for e in done] == ["decline"]


@pytest.mark.parametrize(
    ("answer", "field", "named"),
    [
        ("approve", "decision", "'approve'"),  # a HITL decision does not answer a server's question
        ({"decision": "accept"}, "content", "None"),
        ({"decision": "accept", "content": ["Ada"]}, "content", "['Ada']"),
        (42, "decision", "42"),
    ],
)
def test_an_answer_that_cannot_fit_is_a_422_naming_the_field_and_the_run_stays_paused(
    tmp_path, answer, field, named
):
    _paused(tmp_path)
    with pytest.raises(RunResumeError, match="run_ask|content") as caught:
        resume_run("run_ask", answer, storage=tmp_path, registry=make_registry())
    assert (caught.value.status, caught.value.field) == (422, field)
    assert named in str(caught.value)
    assert RunHistory(tmp_path).run("run_ask")["status"] == "interrupted"  # type: ignore[index]
