"""Loop and Map nodes on real compiled graphs, their tools really running (the rehearsal model, which calls
each bound tool once with the item it is given): a Loop runs its body once per item and stops at
maxIterations, a Map runs the next node on every item at most maxConcurrency at a time, in order."""

from __future__ import annotations

import json
from typing import Any

import pytest

from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from tests.workflow_bridge import _flow_tools
from tests.workflow_bridge._compiler_support import agent, run, workflow
from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler
from workflow_bridge.runner import run_workflow

MODULE = "tests.workflow_bridge._flow_tools"


def _tool(name: str, function: str, prop: str, kind: str) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"Test tool {name}.",
        "tool_type": "local",
        "input_schema": {"type": "object", "properties": {prop: {"type": kind}}, "required": [prop]},
        "execution_config": {"module": MODULE, "function": function},
    }


@pytest.fixture
def registry() -> ToolRegistry:
    reg = ToolRegistry(allowed_modules=[MODULE])
    reg.register(_tool("Visit", "visit", "customer", "string"))
    reg.register(_tool("Measure", "measure", "item", "integer"))
    _flow_tools.reset()
    return reg


@pytest.fixture
def executor(registry: ToolRegistry) -> ToolExecutor:
    return ToolExecutor(registry)


def loop_workflow(max_iterations: Any = 10, back_edge: bool = True, **loop: Any):
    """Start -> Loop (for each customer) -> Visitor agent (the Visit tool) -> back to the Loop; Loop -> End."""
    config = {"loopType": "for-each", "arrayVariable": "customers", "itemVariable": "customer", **loop}
    if max_iterations is not None:
        config["maxIterations"] = max_iterations
    edges = [("start", "loop"), ("loop", "visitor"), ("loop" if back_edge else "visitor", "end")]
    if back_edge:
        edges.append(("visitor", "loop"))
    return workflow(
        [
            agent("start", "Start", input_schema=["customers"]),
            agent(
                "loop", "Loop", name="Each customer", metadata={"loop_config": config, "canvas_node_id": 2}
            ),
            agent("visitor", tools=["Visit"], name="Visitor"),
            agent("end", "End", output_schema=["result"]),
        ],
        edges,
        state_schema={"customers": "array"},
    )


def customers(n: int) -> list[dict[str, str]]:
    return [{"customer": f"c{i}"} for i in range(n)]


@pytest.mark.parametrize("back_edge", [True, False], ids=["body-connected-back", "one-next-node"])
def test_a_loop_over_five_items_calls_its_tool_five_times(registry, executor, back_edge):
    wf, agents = loop_workflow(back_edge=back_edge)
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    state = run(graph, "visit every customer", customers=customers(5))
    assert _flow_tools.CALLS == ["c0", "c1", "c2", "c3", "c4"]
    results = json.loads(state["result"])
    assert len(results) == 5 and all(f"c{i}" in str(r) for i, r in enumerate(results))
    loop_messages = [m for m in state["messages"] if m.get("agent") == "loop"]
    assert loop_messages[-1]["status"] == "completed" and loop_messages[-1]["iterations"] == 5


def test_a_loop_stops_at_max_iterations_and_the_run_ends_completed_with_errors(registry, executor):
    wf, agents = loop_workflow(max_iterations=3)
    events: list[dict[str, Any]] = []
    result = run_workflow(
        {"workflow": wf, "agents": agents},
        registry=registry,
        executor=executor,
        run_id="run_bound",
        user_input="visit",
        payload={"customers": customers(5)},
        on_event=events.append,
    )
    (finished,) = [e for e in events if e["type"] == "run.finished"]
    assert finished["status"] == "completed_with_errors" and finished["failed_nodes"] == ["loop"]
    assert _flow_tools.CALLS == ["c0", "c1", "c2"]
    (last,) = [m for m in result["messages"] if m.get("agent") == "loop" and m.get("status") == "failed"]
    assert "'Each customer'" in last["error"] and "canvas id 2" in last["error"]
    assert "maxIterations=3" in last["error"] and "2 of 5 items were not processed" in last["error"]


def test_a_loop_without_a_bound_is_a_compile_error_naming_the_node_and_field(registry, executor):
    wf, agents = loop_workflow(max_iterations=None)
    with pytest.raises(WorkflowCompileError) as caught:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    assert caught.value.node_id == "loop" and caught.value.field == "config.maxIterations"
    message = str(caught.value)
    assert "'Each customer'" in message and "canvas id 2" in message and "set maxIterations" in message


def test_a_loop_over_a_variable_declared_as_text_is_a_compile_error(registry, executor):
    wf, agents = loop_workflow()
    wf["state_schema"] = {"customers": "string"}
    with pytest.raises(WorkflowCompileError) as caught:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    assert caught.value.field == "config.arrayVariable" and "'string'" in str(caught.value)


def test_a_loop_over_something_that_is_not_a_list_at_run_time_is_a_failed_entry(registry, executor):
    wf, agents = loop_workflow()
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    state = run(graph, "visit", customers="nobody")
    assert _flow_tools.CALLS == []
    (failed,) = [m for m in state["messages"] if m.get("status") == "failed"]
    assert "is not a list" in failed["error"] and "'Each customer'" in failed["error"]


def test_a_for_loop_runs_max_iterations_times_and_a_while_loop_stops_on_its_condition_or_bound(
    registry, executor
):
    wf, agents = loop_workflow(max_iterations=4, loopType="for")
    run(WorkflowCompiler(registry, executor).compile(wf, agents), "visit")
    assert len(_flow_tools.CALLS) == 4  # a for loop: maxIterations times
    _flow_tools.reset()
    wf, agents = loop_workflow(max_iterations=4, loopType="while", condition="keep_going == 'yes'")
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    run(graph, "visit", keep_going="no")
    assert _flow_tools.CALLS == []
    state = run(graph, "visit", run_id="run_2", keep_going="yes")
    assert len(_flow_tools.CALLS) == 4
    (failed,) = [m for m in state["messages"] if m.get("status") == "failed"]
    assert (
        "maxIterations=4 with its condition \"keep_going == 'yes'\" still asking for more" in failed["error"]
    )
    wf, agents = loop_workflow(loopType="while")
    with pytest.raises(WorkflowCompileError) as caught:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    assert caught.value.field == "config.condition"


def test_a_cycle_without_a_loop_node_is_still_a_compile_error_with_a_hint(registry, executor):
    wf, agents = workflow([agent("a", name="Draft"), agent("b", name="Review")], [("a", "b"), ("b", "a")])
    with pytest.raises(WorkflowCompileError, match="put a Loop node in the cycle"):
        WorkflowCompiler(registry, executor).compile(wf, agents)


def map_workflow(concurrency: Any = 4, **config: Any):
    """Start -> Numbers (a list) -> Map -> Squarer agent (the Measure tool) -> End."""
    return workflow(
        [
            agent("start", "Start", input_schema=["numbers"]),
            agent(
                "map",
                "Map",
                name="Square each",
                metadata={
                    "map_config": {"maxConcurrency": concurrency, "arrayVariable": "numbers", **config}
                },
            ),
            agent("squarer", tools=["Measure"], name="Squarer"),
            agent("end", "End", output_schema=["result"]),
        ],
        [("start", "map"), ("map", "squarer"), ("squarer", "end")],
        state_schema={"numbers": "array"},
    )


def test_a_map_over_twenty_items_keeps_four_in_flight_and_their_order(registry, executor):
    wf, agents = map_workflow(4)
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    items = [{"item": i} for i in range(20)]
    state = run(graph, "square them", numbers=items)
    assert sorted(_flow_tools.CALLS, key=int) == [str(i) for i in range(20)]
    assert _flow_tools.IN_FLIGHT["max"] == 4  # the tool itself saw four at once, never more
    results = json.loads(state["result"])
    assert len(results) == 20
    for i, value in enumerate(results):
        assert f'{{"item": {i}, "square": {i * i}}}' in str(value), (i, value)  # item i's own result


def test_a_map_over_a_value_that_is_not_a_list_is_a_failed_entry_and_bad_config_a_compile_error(
    registry, executor
):
    wf, agents = map_workflow(4)
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    state = run(graph, "square", numbers=7)
    (failed,) = [m for m in state["messages"] if m.get("status") == "failed"]
    assert "'Square each'" in failed["error"] and "not a list" in failed["error"]
    for config, field in (
        ({"maxConcurrency": 0}, "config.maxConcurrency"),
        ({"operation": "sum"}, "config.operation"),
        ({"arrayVariable": "title"}, "config.arrayVariable"),  # declared as a string: not a list
    ):
        wf, agents = map_workflow(**config)
        wf["state_schema"]["title"] = "string"
        with pytest.raises(WorkflowCompileError) as caught:
            WorkflowCompiler(registry, executor).compile(wf, agents)
        assert caught.value.field == field and caught.value.node_id == "map"


def test_a_map_or_loop_over_an_empty_list_goes_straight_on(registry, executor):
    wf, agents = map_workflow(4)
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "square", numbers=[])
    assert state["result"] == "[]" and _flow_tools.CALLS == []
    wf, agents = loop_workflow()
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "visit", customers=[])
    assert state["result"] == "[]" and _flow_tools.CALLS == []


def test_a_loop_stops_when_the_runs_budget_is_spent_and_says_which_limit(registry, executor):
    from echo_tools.gate import Budget, Grants, Principal, acting_as

    wf, agents = loop_workflow(max_iterations=10)
    tight = Principal("tester", Grants(budget=Budget(max_calls=2)))
    with acting_as(tight):
        state = run_workflow(
            {"workflow": wf, "agents": agents},
            registry=registry,
            executor=executor,
            run_id="run_budget",
            user_input="visit",
            payload={"customers": customers(5)},
        )
    assert _flow_tools.CALLS == ["c0", "c1"]
    (stopped,) = [m for m in state["messages"] if m.get("agent") == "loop" and m.get("status") == "failed"]
    assert "stopped after 2 iteration(s)" in stopped["error"] and "(max_calls)" in stopped["error"]


def test_a_loop_inside_a_loop_runs_its_body_for_every_outer_iteration(registry, executor):
    def loop(agent_id: str, name: str, times: int) -> dict[str, Any]:
        config = {"loopType": "for", "maxIterations": times, "itemVariable": f"{agent_id}_index"}
        return agent(agent_id, "Loop", name=name, metadata={"loop_config": config})

    wf, agents = workflow(
        [
            agent("start", "Start"),
            loop("outer", "Each week", 2),
            loop("inner", "Each day", 3),
            agent("visitor", tools=["Visit"], name="Visitor"),
            agent("end", "End", output_schema=["result"]),
        ],
        [
            ("start", "outer"),
            ("outer", "inner"),
            ("inner", "visitor"),
            ("visitor", "inner"),  # the inner body leads back to the inner loop
            ("inner", "outer"),  # and the inner loop, when done, back to the outer one
            ("outer", "end"),
        ],
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "visit")
    assert len(_flow_tools.CALLS) == 6
    weeks = json.loads(state["result"])
    assert len(weeks) == 2 and all(len(week) == 3 for week in weeks)


def test_a_for_each_loop_without_an_array_variable_goes_over_the_previous_output(registry, executor):
    wf, agents = loop_workflow(arrayVariable="")  # the IDE's default
    state = run(
        WorkflowCompiler(registry, executor).compile(wf, agents),
        "visit",
        crew_result=json.dumps(customers(2)),
    )
    assert _flow_tools.CALLS == ["c0", "c1"] and len(json.loads(state["result"])) == 2
