"""Sampling inside a compiled workflow: a CrewAI agent (CrewAI's real `LLM`, on a loopback server speaking
OpenAI's chat completions) calls an MCP tool whose server asks for a completion; the agent's own model
answers it, and the node's tool events record the sampling."""

from __future__ import annotations

import json

from tests.workflow_bridge._compiler_support import agent, chain, run
from tests.workflow_bridge._openai_server import scripted_openai_server
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.llm import llm_from_spec
from workflow_bridge.llm_rehearsal import RehearsalLLM


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m.get("role") == "tool"]


def test_the_agents_model_answers_its_mcp_servers_sampling_request(asking, monkeypatch):
    monkeypatch.setenv("ECHO_LLM_API_KEY", "sk-dummy")
    registry, executor, log = asking
    wf, agents = chain(
        agent("writer", tools=["asking_summarise"]), agent("end", "End", output_schema=["result"])
    )
    steps = [
        [{"name": "asking_summarise", "arguments": {"text": "the quarterly report"}}],
        "The report, in one line.",  # the server's sampling request, answered by the same model
        lambda request: "Final: " + tool_messages(request)[0]["content"],
    ]
    with scripted_openai_server(steps) as server:
        llm = llm_from_spec(f"{server.url}#gpt-4o-mini")
        state = run(WorkflowCompiler(registry, executor, llm=llm).compile(wf, agents), "summarise it")

    sampling_request = server.requests[1]
    assert sampling_request["messages"] == [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "Summarise: the quarterly report"},
    ]
    assert "tools" not in sampling_request
    assert "The report, in one line." in state["crew_result"]
    (event,) = [e for e in log.events if e.type == "tool.sampling"]
    assert event.agent_id == "writer" and event.run_id == "run_test"
    assert event.metadata["outcome"] == "answered" and event.metadata["model"] == "gpt-4o-mini"
    assert any(e["type"] == "tool.sampling" for e in state["tool_events"])


def test_the_offline_rehearsal_model_answers_too(asking):
    registry, executor, log = asking
    llm = RehearsalLLM()
    wf, agents = chain(agent("writer", tools=["asking_summarise"]))
    state = run(WorkflowCompiler(registry, executor, llm=llm).compile(wf, agents), "the minutes")
    (event,) = [e for e in log.events if e.type == "tool.sampling"]
    assert event.metadata["model"] == "echo-rehearsal" and event.metadata["outcome"] == "answered"
    completed = [e for e in log.events if e.type == "tool.completed"]
    answer = json.loads(completed[0].output["result"])
    assert answer["model"] == "echo-rehearsal" and "Summarise:" in answer["text"]
    assert state["crew_result"]
