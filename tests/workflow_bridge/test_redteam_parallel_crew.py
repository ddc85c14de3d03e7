"""Red-team review of issue 34: a run's scope reaches every agent of a node, whatever thread runs it.
`CrewAIAdapter.create_parallel_crew_node` (EchoAI's parallel crew) runs its agents on a
`ThreadPoolExecutor`, which does not carry the context variables the scope lives in. Real CrewAI agents
with the rehearsal model.

Each `xfail(strict=True)` test is a finding (it asserts what should happen and fails on main today); the
other tests are attacks that held."""

from __future__ import annotations

import pytest

from echo_tools.gate import Budget, CallScope, Grants, Principal
from tests.workflow_bridge._compiler_support import agent, make_executor, make_registry
from workflow_bridge.run_scope import running

pytestmark = [
    pytest.mark.slow,  # CrewAI
    pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning"),
]

ALICE = Principal("alice", Grants(permissions=[], budget=Budget(max_calls=1)))


def test_the_agents_of_a_parallel_crew_call_tools_under_the_run_s_scope() -> None:
    from workflow_bridge.crewai_adapter import CrewAIAdapter

    registry = make_registry()
    executor, log = make_executor(registry)
    adapter = CrewAIAdapter(registry, executor)
    node = adapter.create_parallel_crew_node(
        [agent("pa", tools=["Echo"], name="A"), agent("pb", tools=["Echo"], name="B")], node_id="crew"
    )
    with running(CallScope.admit(ALICE, run_id="run_crew")):
        node({"user_input": "topic", "run_id": "run_crew", "workflow_id": "wf"})
    executor.close()
    calls = [e for e in log.events if e.type in ("tool.completed", "tool.failed")]
    assert calls and {e.principal for e in calls} == {"alice"}, [(e.type, e.principal) for e in calls]
    assert len([e for e in calls if e.type == "tool.completed"]) <= 1


def test_an_agent_node_calls_tools_under_the_run_s_scope() -> None:
    """Held: one agent run by the same adapter in the run's own thread carries the scope to its calls."""
    from workflow_bridge.crewai_adapter import CrewAIAdapter

    registry = make_registry()
    executor, log = make_executor(registry)
    adapter = CrewAIAdapter(registry, executor)
    with running(CallScope.admit(ALICE, run_id="run_solo")):
        text, _, _, _ = adapter.run_agent(
            agent("pa", tools=["Echo"], name="A"), {"run_id": "run_solo"}, "n1", None
        )
    executor.close()
    calls = [e for e in log.events if e.type in ("tool.completed", "tool.failed")]
    assert calls and {e.principal for e in calls} == {"alice"}
