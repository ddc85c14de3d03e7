"""Failures a first run must show: a failed fan-out arm stays in `parallel_output` (issue 17.8), a failed
node is reported failed on the run's stream, and a Conditional whose variable is missing is an error."""

from __future__ import annotations

import pytest

from tests.workflow_bridge._compiler_support import agent, chain, make_executor, make_registry, run, workflow
from tests.workflow_bridge._fake_llms import FunctionCallingLLM
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.conditions import ConditionVariableError, evaluate_condition
from workflow_bridge.runner import run_workflow


@pytest.fixture
def registry():
    return make_registry()


def fan_out(second: dict) -> tuple[dict, dict]:
    return workflow(
        [
            agent("start", "Start"),
            agent("good", tools=["Echo"], name="Good Branch"),
            second,
            agent("merge", "Merge"),
            agent("end", "End", output_schema=["result"]),
        ],
        [
            ("start", "good"),
            ("start", second["agent_id"]),
            ("good", "merge"),
            (second["agent_id"], "merge"),
            ("merge", "end"),
        ],
        model="parallel",
    )


def test_a_failed_tool_branch_stays_in_parallel_output_marked_failed(registry):
    registry.delete("tool_http_request")  # the API arm's tool is gone: its call fails with not_found
    executor, _ = make_executor(registry)
    api = agent("fetch", "API", name="Fetch Score", metadata={"api_config": {"url": "https://x.example"}})
    wf, agents = fan_out(api)
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "topic")
    assert set(state["parallel_output"]) == {"Good Branch", "Fetch Score"}
    assert state["parallel_output"]["Fetch Score"].startswith("[failed] not_found:")
    assert "tool_http_request" in state["parallel_output"]["Fetch Score"]
    assert state["individual_outputs"]["fetch"] == state["parallel_output"]["Fetch Score"]
    assert "[Fetch Score]\n[failed] not_found" in state["result"]  # the join shows it too


def test_a_failed_agent_branch_stays_in_parallel_output_and_the_other_branch_survives(registry):
    executor, _ = make_executor(registry)

    def answer(messages, tools):
        if "Doomed Branch" in str(messages):
            raise ConnectionError("model endpoint http://127.0.0.1:9/v1 refused the connection")
        return "the good branch's answer"

    llm = FunctionCallingLLM([answer] * 6)
    wf, agents = fan_out(agent("doomed", name="Doomed Branch", role="Doomed Branch"))
    state = run(WorkflowCompiler(registry, executor, llm=llm).compile(wf, agents), "topic")
    assert state["parallel_output"]["Good Branch"] == "the good branch's answer"
    failed = state["parallel_output"]["Doomed Branch"]
    assert failed.startswith("[failed] execution:") and "refused the connection" in failed
    (message,) = [m for m in state["messages"] if m.get("agent") == "doomed"]
    assert message["status"] == "failed" and "'Doomed Branch' (doomed)" in message["error"]


def test_echoais_parallel_crew_keeps_a_failed_agent_marked_failed(registry):
    from workflow_bridge.crewai_adapter import CrewAIAdapter

    executor, _ = make_executor(registry)

    def answer(messages, tools):
        if "Bad" in str(messages):
            raise ConnectionError("no model at http://127.0.0.1:9/v1")
        return "fine"

    adapter = CrewAIAdapter(registry, executor, FunctionCallingLLM([answer] * 6))
    node = adapter.create_parallel_crew_node(
        [agent("pa", name="Fine", role="Fine"), agent("pb", name="Bad", role="Bad")], node_id="crew"
    )
    delta = node({"user_input": "topic", "run_id": "run_crew", "workflow_id": "wf"})
    assert delta["individual_outputs"]["pa"] == "fine"
    assert delta["individual_outputs"]["pb"].startswith("[failed] execution:")
    assert "[Bad]\n[failed] execution:" in delta["parallel_output"]
    assert "no model at" in delta["messages"][0]["failed"]["pb"]


def test_a_failed_code_node_is_reported_failed_on_the_runs_stream(registry):
    from tests.workflow_bridge._compiler_support import agent_tools_registry

    tools = agent_tools_registry()
    executor, _ = make_executor(tools)
    wf, agents = chain(
        agent("calc", "Code", name="Extract Score", metadata={"code_config": {"code": "1/0"}}),
        agent("end", "End", output_schema=["result"]),
    )
    events: list[dict] = []
    run_workflow(
        {"workflow": wf, "agents": agents},
        registry=tools,
        executor=executor,
        user_input="x",
        on_event=events.append,
    )
    (finished,) = [e for e in events if e["type"] == "node.finished" and e["node_id"] == "calc"]
    assert finished["status"] == "failed"
    assert "ZeroDivisionError" in finished["error"] and finished["name"] == "Extract Score"
    (end,) = [e for e in events if e["type"] == "node.finished" and e["node_id"] == "end"]
    assert "status" not in end


def test_a_node_that_raises_is_reported_as_node_failed_before_the_run_stops(registry):
    executor, _ = make_executor(registry)

    def boom(messages, tools):
        raise ConnectionError("model endpoint http://127.0.0.1:9/v1 refused the connection")

    wf, agents = chain(agent("writer", name="Writer", role="Writer"))
    events: list[dict] = []
    with pytest.raises(RuntimeError, match="'Writer' \\(writer\\)"):
        run_workflow(
            {"workflow": wf, "agents": agents},
            registry=registry,
            executor=executor,
            user_input="x",
            llm=FunctionCallingLLM([boom] * 3),
            on_event=events.append,
        )
    (failed,) = [e for e in events if e["type"] == "node.failed"]
    assert failed["node_id"] == "writer" and "refused the connection" in failed["error"]


def conditional_workflow() -> tuple[dict, dict]:
    branches = [
        {"type": "if", "condition": "risk_score > 70", "targetNodeId": "high"},
        {"type": "else", "targetNodeId": "low"},
    ]
    return workflow(
        [
            agent("start", "Start"),
            agent("gate", "Conditional", name="High Risk?", metadata={"branches": branches}),
            agent("high", "End", name="Escalate"),
            agent("low", "End", name="Approve"),
        ],
        [("start", "gate"), ("gate", "high"), ("gate", "low")],
        model="hybrid",
        state_schema={"risk_score": "number"},
    )


def test_a_conditional_whose_variable_is_missing_is_an_error_naming_the_node_and_the_variable(registry):
    executor, _ = make_executor(registry)
    wf, agents = conditional_workflow()
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    with pytest.raises(ConditionVariableError) as caught:
        run(graph, "review ACME")
    message = str(caught.value)
    assert "'High Risk?' (gate)" in message and "'risk_score'" in message
    assert caught.value.variable == "risk_score" and caught.value.expression == "risk_score > 70"


@pytest.mark.parametrize(("score", "taken"), [(82, "high"), (35, "low")])
def test_a_conditional_whose_variable_is_set_still_routes(registry, score, taken):
    executor, _ = make_executor(registry)
    wf, agents = conditional_workflow()
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "review", risk_score=score)
    assert state["messages"][-1]["agent"] == taken


def test_a_variable_set_to_none_is_present_and_takes_the_else_branch(registry):
    executor, _ = make_executor(registry)
    wf, agents = conditional_workflow()
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "review", risk_score=None)
    assert state["messages"][-1]["agent"] == "low"


def test_strict_evaluation_names_the_missing_variable_and_literals_are_not_variables():
    with pytest.raises(ConditionVariableError, match="'deal_size'") as caught:
        evaluate_condition("approved == true and deal_size > 5", {"approved": True}, strict=True)
    assert caught.value.variable == "deal_size"
    assert evaluate_condition("flag == null", {"flag": None}, strict=True) is True
    assert evaluate_condition("missing > 3", {}) is False  # the lenient default is EchoAI's


def test_canvas_agents_are_prompted_with_their_node_name_not_echoais_fixed_role(registry):
    from workflow_bridge.agent_factory import AgentFactory

    executor, _ = make_executor(registry)
    factory = AgentFactory(registry, executor)
    generic = agent("agt_1", name="Web Search Agent")  # role "Autonomous AI agent", "Agent node"
    crew_agent = factory.create_agent(generic, llm=FunctionCallingLLM(["ok"]))
    assert crew_agent.role == "Web Search Agent"
    assert "Autonomous AI agent" not in crew_agent.backstory and "Agent node" not in crew_agent.backstory
    assert "Web Search Agent" in crew_agent.goal
    own = agent("agt_2", name="Scout", role="Market researcher", goal="Find three competitors")
    crew_agent = factory.create_agent(own, llm=FunctionCallingLLM(["ok"]))
    assert (crew_agent.role, crew_agent.goal) == ("Market researcher", "Find three competitors")


def test_the_task_names_the_node_and_tool_events_carry_the_agents_canvas_name(registry):
    executor, _ = make_executor(registry)
    llm = FunctionCallingLLM([[{"name": "echo", "args": {"text": "hi"}}]])
    wf, agents = chain(agent("agt_5f3a", name="Web Search Agent", tools=["Echo"]))
    events: list[dict] = []
    state = run_workflow(
        {"workflow": wf, "agents": agents},
        registry=registry,
        executor=executor,
        user_input="hi",
        llm=llm,
        on_event=events.append,
    )
    prompt = str(llm.requests[0]["messages"])
    assert "You are Web Search Agent" in prompt and "YOUR ROLE:\\nWeb Search Agent" in prompt
    assert "Autonomous AI agent" not in prompt
    tool_events = [e for e in state["tool_events"] if e["type"].startswith("tool.")]
    assert tool_events and {e["agent_name"] for e in tool_events} == {"Web Search Agent"}
    assert {e["agent_id"] for e in tool_events} == {"agt_5f3a"}  # ids stay as they were
    streamed = [e for e in events if e["type"].startswith("tool.")]
    assert streamed and {e["agent_name"] for e in streamed} == {"Web Search Agent"}


def test_a_cycle_is_a_compile_error_with_a_diagnostic_naming_the_cycle(registry):
    executor, _ = make_executor(registry)
    from workflow_bridge.compiler import WorkflowCompileError

    wf, agents = workflow(
        [
            agent("start", "Start"),
            agent("draft", name="Draft"),
            agent("review", name="Review"),
            agent("revise", name="Revise"),
        ],
        [("start", "draft"), ("draft", "review"), ("review", "revise"), ("revise", "draft")],
    )
    with pytest.raises(WorkflowCompileError) as caught:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    (diagnostic,) = caught.value.diagnostics
    assert (diagnostic.level, diagnostic.field) == ("error", "connections")
    assert diagnostic.node_id in ("draft", "review", "revise")
    assert (
        "'Draft' (draft) -> 'Review' (review) -> 'Revise' (revise) -> 'Draft' (draft)" in diagnostic.message
    )
