"""The native function-calling path end to end: CrewAI's real `LLM` (OpenAI client) against a loopback
server speaking chat completions, driving a compiled workflow whose tools run through the executor."""

from __future__ import annotations

import json

from tests.workflow_bridge._compiler_support import agent, chain, make_executor, make_registry, run
from tests.workflow_bridge._openai_server import scripted_openai_server
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.llm import is_rehearsal, llm_from_spec


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m.get("role") == "tool"]


def test_a_workflow_runs_through_crewai_llm_against_an_openai_speaking_server(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("ECHO_LLM_API_KEY", "sk-dummy")
    registry = make_registry()
    executor, log = make_executor(registry)
    wf, agents = chain(
        agent("writer", tools=["Echo", "Score"]), agent("end", "End", output_schema=["result"])
    )
    steps = [
        [
            {"name": "echo", "arguments": {"text": "from the model"}},
            {"name": "score", "arguments": {"subject": "abcd"}},
        ],
        lambda request: "Final: " + " | ".join(m["content"] for m in tool_messages(request)),
    ]
    with scripted_openai_server(steps) as server:
        llm = llm_from_spec(f"{server.url}#gpt-4o-mini")
        assert not is_rehearsal(llm) and llm.supports_function_calling()
        state = run(WorkflowCompiler(registry, executor, llm=llm).compile(wf, agents), "write it")

    first, second = server.requests
    assert first["_authorization"] == "Bearer sk-dummy"
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    assert set(offered) == {"echo", "score"} and "text" in offered["echo"]["properties"]
    assert "ORIGINAL USER REQUEST:\nwrite it" in first["messages"][-1]["content"]
    results = [json.loads(m["content"]) for m in tool_messages(second)]
    assert results == [{"echo": "echo: from the model"}, {"subject": "abcd", "risk_score": 12}]
    done = [e for e in log.events if e.type == "tool.completed"]
    assert sorted((e.tool_id, e.agent_id) for e in done) == [
        ("tool_echo", "writer"),
        ("tool_score", "writer"),
    ]
    assert state["crew_result"].startswith("Final: ") and "risk_score" in state["result"]
    assert state["messages"][0]["llm"] == "gpt-4o-mini"


def test_a_tool_failure_goes_back_to_the_model_as_the_tool_result(monkeypatch):
    monkeypatch.setenv("ECHO_LLM_API_KEY", "sk-dummy")
    registry = make_registry()
    executor, _ = make_executor(registry)
    wf, agents = chain(agent("a", tools=["Broken"]))
    steps = [
        [{"name": "broken", "arguments": {"reason": "disk on fire"}}],
        lambda r: tool_messages(r)[0]["content"],
    ]
    with scripted_openai_server(steps) as server:
        state = run(
            WorkflowCompiler(registry, executor, llm=f"{server.url}#gpt-4o-mini").compile(wf, agents), "go"
        )
    assert "broken tool: disk on fire" in state["crew_result"]
