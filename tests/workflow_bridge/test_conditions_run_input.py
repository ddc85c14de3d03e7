"""A Conditional's variable given only in the run's input reaches it (EchoAI's "Proposal Generation").

EchoAI's stored workflows branch on keys no agent declares (`win_probability < 30 AND opportunity_value <
500000`); the run's payload carries them. LangGraph drops input keys the state class does not declare, so
the compiler declares every variable a branch reads, and `run_workflow` the payload's keys. Each test runs
on our fixtures in EchoAI's formats and on the real EchoAI corpus when it is here.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import Corpus
from tests.workflow_bridge._compiler_support import agent_tools_registry, make_executor
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.conditions import ConditionError, ConditionVariableError, condition_variables
from workflow_bridge.runner import run_workflow
from workflow_bridge.state import initial_state


@pytest.fixture
def registry():
    registry = agent_tools_registry()
    # an API branch's call then fails at once (not_found) instead of trying a host on the internet
    registry.delete("tool_http_request")
    return registry


def _branching(corpus: Corpus) -> tuple[dict, dict[str, dict], list[str]]:
    workflow = json.loads((corpus / f"workflows/draft/{corpus.branching_workflow}.draft.json").read_text())
    agents = {p.stem: json.loads(p.read_text()) for p in (corpus / "agents").glob("agt_*.json")}
    branches = agents[corpus.branching_conditional]["metadata"]["branches"]
    variables = [v for b in branches for v in condition_variables(b.get("condition") or "")]
    return workflow, agents, variables


def test_the_branching_workflows_condition_reads_keys_its_state_schema_does_not_declare(corpus):
    workflow, _, variables = _branching(corpus)
    assert variables and not set(variables) <= set(workflow["state_schema"])


def test_a_graph_compiled_once_routes_on_condition_variables_given_in_each_runs_payload(corpus, registry):
    # EchoAI compiles a workflow once (`compile_to_langgraph`) and invokes it with each run's payload
    executor, _ = make_executor(registry)
    workflow, agents, variables = _branching(corpus)
    graph = WorkflowCompiler(registry, executor, llm="rehearsal", missing_agents="passthrough").compile(
        workflow, agents
    )
    routes = []
    for value, run_id in ((1, "run_low"), (10**9, "run_high")):
        payload = {"message": "Bid for ACME", **dict.fromkeys(variables, value)}
        state = graph.invoke(
            initial_state(None, workflow["workflow_id"], run_id, **payload),
            {"configurable": {"thread_id": run_id}},
        )
        assert {k: state[k] for k in variables} == dict.fromkeys(variables, value)
        routes.append(state["_routes"][corpus.branching_conditional])
    executor.close()
    assert set(routes) == corpus.branching_targets  # 1 takes the `if` branch, 10**9 the `else`


def test_run_workflow_keeps_every_payload_key_and_routes_without_a_variable_error(corpus, registry):
    executor, _ = make_executor(registry)
    workflow, agents, variables = _branching(corpus)
    payload = {"message": "Bid for ACME", "customer_tier": "gold", **dict.fromkeys(variables, 10**9)}
    state = run_workflow(
        {"workflow": workflow, "agents": agents},
        registry=registry,
        executor=executor,
        llm="rehearsal",
        payload=payload,
        missing_agents="passthrough",
    )
    executor.close()
    assert state["customer_tier"] == "gold"  # declared by no agent and no condition: kept as given
    assert state["_routes"][corpus.branching_conditional] in corpus.branching_targets


def test_without_the_variable_the_conditional_still_names_it(corpus, registry):
    executor, _ = make_executor(registry)
    workflow, agents, variables = _branching(corpus)
    with pytest.raises(ConditionVariableError) as caught:
        run_workflow(
            {"workflow": workflow, "agents": agents},
            registry=registry,
            executor=executor,
            llm="rehearsal",
            payload={"message": "Bid for ACME"},
            missing_agents="passthrough",
        )
    executor.close()
    assert caught.value.variable == variables[0]
    assert repr(variables[0]) in str(caught.value)


def test_condition_variables_lists_state_keys_not_literals_or_functions():
    expression = "win_probability < 30 AND opportunity_value < 500000 or len(notes) > 0 and flag == true"
    assert condition_variables(expression) == ["win_probability", "opportunity_value", "notes", "flag"]
    assert condition_variables("") == [] and condition_variables("risk == null OR risk == risk") == ["risk"]


def test_condition_variables_refuses_an_expression_outside_the_language():
    with pytest.raises(ConditionError, match="__import__"):
        condition_variables("__import__('os') == 1")
