"""WorkflowCompiler on EchoAI workflow JSON: topology, state flow, tool binding, failures, routing, HITL."""

from __future__ import annotations

import pytest
from langgraph.types import Command

from echo_tools.errors import ToolNotFoundError
from tests.workflow_bridge import _compiler_tools as tools
from tests.workflow_bridge._compiler_support import (
    agent,
    chain,
    make_executor,
    make_registry,
    run,
    workflow,
)
from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler
from workflow_bridge.llm_rehearsal import RehearsalLLM
from workflow_bridge.text_arguments import user_request_in


@pytest.fixture
def registry():
    return make_registry()


@pytest.fixture
def executor_and_log(registry):
    return make_executor(registry)


@pytest.fixture
def executor(executor_and_log):
    return executor_and_log[0]


def completed(state: dict, tool_id: str) -> list[dict]:
    return [e for e in state["tool_events"] if e["type"] == "tool.completed" and e["tool_id"] == tool_id]


def test_a_sequential_workflow_runs_its_tools_with_the_agents_ids(registry, executor):
    wf, agents = chain(
        agent("start", "Start", input_schema=["query"]),
        agent("writer", tools=["Echo"]),
        agent("scorer", tools=["tool_score"]),
        agent("end", "End", output_schema=["result"]),
        state_schema={"query": "string", "result": "string"},
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "hello world")

    assert [e["agent_id"] for e in completed(state, "tool_echo")] == ["writer"]
    assert [e["agent_id"] for e in completed(state, "tool_score")] == ["scorer"]
    assert all(e["run_id"] == "run_test" and e["workflow_id"] == "wf_test" for e in state["tool_events"])
    assert '"risk_score": 33' in state["crew_result"]
    assert state["result"] == state["crew_result"]
    assert state["query"] == "hello world"
    assert [m["agent"] for m in state["messages"]] == ["start", "writer", "scorer", "end"]


def test_crew_result_hands_the_previous_agents_output_to_the_next_agent(registry, executor):
    llm = RehearsalLLM()
    wf, agents = chain(agent("first", tools=["Echo"], role="First"), agent("second", role="Second"))
    state = run(WorkflowCompiler(registry, executor, llm=llm).compile(wf, agents), "ping")

    first_output = state["messages"][0]["output_preview"]
    second_task = [c for c in llm.calls if "YOUR ROLE:\nSecond" in c[-1]["content"]][0][-1]["content"]
    assert "echo: ping" in first_output
    assert f"PREVIOUS AGENT OUTPUT:\n{first_output}" in second_task
    assert (
        user_request_in(second_task.split("\n\nThis is the expected")[0].removeprefix("\nCurrent Task: "))
        == "ping"
    )
    assert state["original_user_input"] == "ping"


def test_a_single_agent_without_connections_compiles_and_runs(registry, executor):
    wf, agents = workflow([agent("only", tools=["Echo"])], [])
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "solo")
    assert completed(state, "tool_echo")[0]["agent_id"] == "only"
    assert "echo: solo" in state["crew_result"]


def test_entry_and_end_come_from_the_connections_not_the_canvas_order(registry, executor):
    # canvas order lists the last node first; EchoAI made it the END node and fanned out
    wf, agents = workflow(
        [
            agent("end", "End", output_schema=["result"]),
            agent("start", "Start"),
            agent("work", tools=["Echo"]),
        ],
        [("start", "work"), ("work", "end")],
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "order")
    assert [m["agent"] for m in state["messages"]] == ["start", "work", "end"]
    assert "echo: order" in state["result"]


def test_run_id_and_workflow_id_reach_the_nodes(registry, executor):
    wf, agents = chain(agent("a", tools=["Echo"]))
    state = run(
        WorkflowCompiler(registry, executor).compile(wf, agents), "x", run_id="run_42", workflow_id="wf_9"
    )
    event = completed(state, "tool_echo")[0]
    assert (event["run_id"], event["workflow_id"], event["node_id"]) == ("run_42", "wf_9", "a")
    assert state["run_id"] == "run_42"


def test_an_unknown_tool_fails_the_compile_naming_agent_and_tool(registry, executor):
    wf, agents = chain(agent("a", name="Researcher", tools=["web_fetch"]))
    with pytest.raises(ToolNotFoundError) as info:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    assert "'web_fetch'" in str(info.value) and "'Researcher'" in str(info.value)


def test_disabled_tools_and_disabled_bindings_are_not_bound(registry, executor):
    bindings = [{"tool_id": "tool_echo", "enabled": False}]
    wf, agents = chain(agent("a", tools=["tool_retired", "tool_echo", "tool_score"], tool_bindings=bindings))
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "abc")
    assert state["messages"][0]["tool_names"] == ["score"]
    assert {e["tool_id"] for e in state["tool_events"]} == {"tool_score"}


def test_fixed_binding_parameters_reach_the_tool(registry, executor):
    bindings = [{"tool_id": "tool_echo", "enabled": True, "fixed": {"prefix": "FIXED"}}]
    wf, agents = chain(agent("a", tools=["tool_echo"], tool_bindings=bindings))
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "abc")
    assert completed(state, "tool_echo")[0]["output"] == {"echo": "FIXED: abc"}


def test_a_failing_tool_does_not_kill_the_run_and_the_agent_sees_the_error(registry, executor):
    wf, agents = chain(agent("a", tools=["Broken"]), agent("end", "End", output_schema=["result"]))
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "why")
    failed = [e for e in state["tool_events"] if e["type"] == "tool.failed"]
    assert failed and failed[0]["agent_id"] == "a"
    assert "broken tool: why" in state["crew_result"]
    assert "broken tool: why" in state["result"]


def test_missing_agents_are_listed_or_compiled_as_passthrough(registry, executor):
    wf, agents = chain(agent("a", tools=["Echo"]), agent("b"))
    wf["agents"].append("agt_gone")
    wf["connections"].append({"from": "b", "to": "agt_gone"})
    with pytest.raises(WorkflowCompileError, match="agt_gone"):
        WorkflowCompiler(registry, executor).compile(wf, agents)
    graph = WorkflowCompiler(registry, executor, missing_agents="passthrough").compile(wf, agents)
    state = run(graph, "go")
    assert state["messages"][-1]["passthrough"] is True


def test_a_connection_to_an_unknown_node_and_a_cycle_are_errors(registry, executor):
    wf, agents = chain(agent("a"), agent("b"))
    wf["connections"].append({"from": "b", "to": "nowhere"})
    with pytest.raises(WorkflowCompileError, match="'nowhere'"):
        WorkflowCompiler(registry, executor).compile(wf, agents)
    wf["connections"][-1] = {"from": "b", "to": "a"}
    with pytest.raises(WorkflowCompileError, match="cycle"):
        WorkflowCompiler(registry, executor).compile(wf, agents)


def _conditional_workflow(condition: str):
    branches = [
        {"type": "if", "condition": condition, "targetNodeId": "high"},
        {"type": "else", "condition": "", "targetNodeId": "low"},
    ]
    return workflow(
        [
            agent("start", "Start"),
            agent("scorer", tools=["Score"]),
            agent("gate", "Conditional", metadata={"branches": branches}),
            agent("high", tools=["Echo"], name="High risk"),
            agent("low", name="Low risk"),
            agent("end", "End", output_schema=["result"]),
        ],
        [
            ("start", "scorer"),
            ("scorer", "gate"),
            ("gate", "high"),
            ("gate", "low"),
            ("high", "end"),
            ("low", "end"),
        ],
        model="hybrid",
    )


@pytest.mark.parametrize(
    ("subject", "taken", "skipped"), [("a long subject", "high", "low"), ("ab", "low", "high")]
)
def test_a_conditional_routes_on_a_value_the_previous_agent_reported(
    registry, executor, subject, taken, skipped
):
    wf, agents = _conditional_workflow("risk_score > 30 AND NOT risk_score > 1000")
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), subject)
    ran = [m["agent"] for m in state["messages"]]
    assert taken in ran and skipped not in ran
    assert ran[-1] == "end"
    assert state["_conditional_route"] == taken


def test_a_conditional_with_eval_tricks_does_not_compile(registry, executor):
    wf, agents = _conditional_workflow("().__class__.__base__.__subclasses__()")
    with pytest.raises(WorkflowCompileError, match="gate"):
        WorkflowCompiler(registry, executor).compile(wf, agents)


def _hitl_workflow():
    return chain(
        agent("draft", tools=["Echo"]),
        agent("review", "HITL", metadata={"hitl_config": {"title": "Check", "message": "Approve?"}}),
        agent("end", "End", output_schema=["result"]),
    )


def test_hitl_pauses_the_run_and_resumes_on_approval(registry, executor):
    wf, agents = _hitl_workflow()
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    paused = run(graph, "draft it", run_id="run_hitl")
    request = paused["__interrupt__"][0].value
    assert request["title"] == "Check" and "echo: draft it" in request["crew_result"]
    assert "result" not in paused

    final = graph.invoke(Command(resume="approve"), {"configurable": {"thread_id": "run_hitl"}})
    assert "echo: draft it" in final["result"]
    assert final["hitl_decision"]["decision"] == "approve"


def test_hitl_rejection_ends_the_run_and_an_edit_replaces_the_output(registry, executor):
    wf, agents = _hitl_workflow()
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    run(graph, "x", run_id="run_reject")
    rejected = graph.invoke(
        Command(resume={"decision": "reject", "comment": "no"}), {"configurable": {"thread_id": "run_reject"}}
    )
    assert rejected["result"].startswith("Rejected at 'review'")
    assert "end" not in [m["agent"] for m in rejected["messages"]]

    run(graph, "x", run_id="run_edit")
    edited = graph.invoke(
        Command(resume={"decision": "edit", "edited_output": "EDITED"}),
        {"configurable": {"thread_id": "run_edit"}},
    )
    assert edited["result"] == "EDITED"


def test_parallel_branches_overlap_in_time_and_their_outputs_merge(registry, executor_and_log):
    executor, log = executor_and_log
    tools.reset()
    wf, agents = workflow(
        [
            agent("start", "Start"),
            agent("branch_a", tools=["Meet A"], name="Branch A"),
            agent("branch_b", tools=["Meet B"], name="Branch B"),
            agent("merge", "Merge"),
            agent("end", "End", output_schema=["result"]),
        ],
        [
            ("start", "branch_a"),
            ("start", "branch_b"),
            ("branch_a", "merge"),
            ("branch_b", "merge"),
            ("merge", "end"),
        ],
        model="parallel",
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "topic")
    # the executor's log is in emission order; the state's tool_events are grouped per node
    position = {(e.type, e.tool_id): i for i, e in enumerate(log.events)}
    assert {e["type"] for e in state["tool_events"]} == {"tool.invoked", "tool.completed"}
    # each branch's tool started before the other one's finished: they ran at the same time
    assert position[("tool.invoked", "tool_meet_b")] < position[("tool.completed", "tool_meet_a")]
    assert position[("tool.invoked", "tool_meet_a")] < position[("tool.completed", "tool_meet_b")]
    assert set(state["individual_outputs"]) == {"branch_a", "branch_b"}
    assert set(state["parallel_output"]) == {"Branch A", "Branch B"}
    assert "[Branch A]" in state["result"] and "[Branch B]" in state["result"]
    assert [m["agent"] for m in state["messages"]].count("merge") == 1


def test_a_join_waits_for_branches_of_different_lengths(registry, executor):
    wf, agents = workflow(
        [
            agent("s", "Start"),
            agent("a1", tools=["Echo"]),
            agent("a2", tools=["Score"]),
            agent("b1"),
            agent("j"),
        ],
        [("s", "a1"), ("a1", "a2"), ("s", "b1"), ("a2", "j"), ("b1", "j")],
        model="parallel",
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "join")
    ran = [m["agent"] for m in state["messages"]]
    assert ran.count("j") == 1 and ran[-1] == "j"


def test_an_api_node_calls_the_http_tool_without_an_llm(registry, executor):
    api = {"method": "POST", "url": "https://crm.example/v1/notify", "headers": {"X-Team": "deals"}}
    wf, agents = chain(agent("a", tools=["Echo"]), agent("notify", "API", metadata={"api_config": api}))
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "deal")
    assert completed(state, "tool_http_request")[0]["agent_id"] == "notify"
    call = [
        e for e in state["tool_events"] if e["type"] == "tool.invoked" and e["tool_id"] == "tool_http_request"
    ][0]
    assert call["input"]["url"] == "https://crm.example/v1/notify" and call["input"]["method"] == "POST"
    assert "echo: deal" in call["input"]["json"]["previous_output"]
    assert '"status": 200' in state["crew_result"]


def test_a_hierarchical_crew_delegates_to_workers_whose_tools_run(registry, executor):
    wf, agents = workflow(
        [
            agent("boss", name="Lead"),
            agent("w1", tools=["Echo"], name="Writer"),
            agent("w2", tools=["Score"], name="Scorer"),
        ],
        [("boss", "w1"), ("boss", "w2")],
        model="hierarchical",
        hierarchy={"master_agent": "boss", "delegation_order": ["w1", "w2"]},
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "plan")
    assert {e["tool_id"] for e in state["tool_events"] if e["type"] == "tool.completed"} == {
        "tool_echo",
        "tool_score",
    }
    assert {e["agent_id"] for e in state["tool_events"]} == {"w1", "w2"}
    assert state["hierarchical_output"] == state["crew_result"]
    assert state["messages"][0]["node"] == "hierarchical_crew"


def test_a_tool_node_in_a_parallel_branch_contributes_to_the_merge(registry, executor):
    api = {"method": "GET", "url": "https://risk.example/v1/score"}
    wf, agents = workflow(
        [
            agent("start", "Start"),
            agent("fetch", "API", name="Fetch", metadata={"api_config": api}),
            agent("write", tools=["Echo"], name="Write"),
            agent("merge", "Merge"),
        ],
        [("start", "fetch"), ("start", "write"), ("fetch", "merge"), ("write", "merge")],
        model="parallel",
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "both")
    assert set(state["individual_outputs"]) == {"fetch", "write"}
    assert "[Fetch]" in state["crew_result"] and "[Write]" in state["crew_result"]


def test_echoais_parallel_crew_node_runs_its_agents_at_the_same_time(registry, executor_and_log):
    from workflow_bridge.crewai_adapter import CrewAIAdapter

    executor, log = executor_and_log
    tools.reset()
    adapter = CrewAIAdapter(registry, executor)
    node = adapter.create_parallel_crew_node(
        [agent("pa", tools=["Meet A"], name="A"), agent("pb", tools=["Meet B"], name="B")], node_id="crew"
    )
    delta = node({"user_input": "topic", "run_id": "run_crew", "workflow_id": "wf"})
    completed_tools = {e.tool_id for e in log.events if e.type == "tool.completed"}
    assert completed_tools == {"tool_meet_a", "tool_meet_b"}  # each waited for the other to start
    assert set(delta["individual_outputs"]) == {"pa", "pb"}
    assert "[A]" in delta["parallel_output"] and delta["crew_result"] == delta["parallel_output"]
    assert {e["node_id"] for e in delta["tool_events"]} == {"crew:pa", "crew:pb"}


async def test_the_graph_also_runs_under_ainvoke_from_an_event_loop(registry, executor):
    from workflow_bridge.state import initial_state

    wf, agents = chain(
        agent("a", tools=["Echo"]), agent("api", "API", metadata={"api_config": {"url": "https://x.example"}})
    )
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    state = await graph.ainvoke(
        initial_state("async", "wf", "run_async"), {"configurable": {"thread_id": "run_async"}}
    )
    assert [e["agent_id"] for e in state["tool_events"] if e["type"] == "tool.completed"] == ["a", "api"]


def test_a_hierarchical_workflow_without_a_hierarchy_block_takes_the_first_agent_as_master(
    registry, executor
):
    wf, agents = workflow(
        [
            agent("s", "Start"),
            agent("lead", name="Lead"),
            agent("w", tools=["Echo"], name="Worker"),
            agent("e", "End"),
        ],
        [("s", "lead"), ("lead", "w"), ("w", "e")],
        model="hierarchical",
    )
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    assert "w" not in graph.get_graph().nodes  # the delegate runs inside the lead's crew
    state = run(graph, "delegate")
    assert [(e["tool_id"], e["agent_id"]) for e in state["tool_events"] if e["type"] == "tool.completed"] == [
        ("tool_echo", "w")
    ]
    assert [m.get("agent") or m.get("node") for m in state["messages"]] == ["s", "hierarchical_crew", "e"]


def test_start_fills_several_input_variables_from_a_json_request(registry, executor):
    wf, agents = chain(agent("s", "Start", input_schema=["company", "deal_size"]), agent("a", tools=["Echo"]))
    state = run(
        WorkflowCompiler(registry, executor).compile(wf, agents), '{"company": "ACME", "deal_size": 5}'
    )
    assert (state["company"], state["deal_size"]) == ("ACME", 5)
