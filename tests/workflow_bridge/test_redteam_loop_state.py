"""Red-team review of issue 34: a Loop or Map node writes its item into the run's state under the canvas's
`itemVariable`, and node contexts take the run id from that state. Real compiled graphs, the rehearsal
model, the run's scope active (`run_scope.running`).

Each `xfail(strict=True)` test is a finding (it asserts what should happen and fails on main today)."""

from __future__ import annotations

import pytest

from echo_tools import MemoryEventLog
from echo_tools.executor import ToolExecutor
from echo_tools.gate import CallScope, Grants, Principal
from tests.workflow_bridge.test_loop_nodes import loop_workflow, registry
from workflow_bridge.run_scope import running
from workflow_bridge.runner import run_workflow

__all__ = ["registry"]  # the fixture of test_loop_nodes: the Visit and Measure tools

ALICE = Principal("alice", Grants(permissions=[]))


@pytest.mark.xfail(
    strict=True,
    reason="itemVariable may name a key every run has ('run_id'): the Loop writes its item there, and "
    "node_context takes the run id from the state, so the body's calls are recorded in (and counted "
    "against the quotas of) a run the canvas names, not the run's own (scope.apply keeps the context's)",
)
def test_a_loop_s_item_variable_cannot_move_the_body_s_calls_into_another_run(registry) -> None:
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log])
    wf, agents = loop_workflow(itemVariable="run_id")
    with running(CallScope.admit(ALICE, run_id="run_alice_loop")):
        run_workflow(
            {"workflow": wf, "agents": agents}, registry=registry, executor=executor,
            run_id="run_alice_loop", user_input="visit", payload={"customers": ["run_of_bob"]},
        )  # fmt: skip
    executor.close()
    calls = [(e.run_id, e.principal) for e in log.events if e.type.startswith("tool.")]
    assert calls and {run for run, _ in calls} == {"run_alice_loop"}, calls


@pytest.mark.xfail(
    strict=True,
    reason="itemVariable may name the Loop's own bookkeeping key ('_loops'): each iteration's item "
    "overwrites the iteration count, so maxIterations never stops the loop; only the run's budget does "
    "(and a run without one, in-process or EchoAI's own routes, loops for ever)",
)
def test_a_loop_s_item_variable_cannot_erase_its_iteration_bound(registry) -> None:
    from echo_tools.gate import Budget
    from tests.workflow_bridge import _flow_tools

    executor = ToolExecutor(registry)
    wf, agents = loop_workflow(max_iterations=3, itemVariable="_loops")
    capped = Principal("alice", Grants(budget=Budget(max_calls=12)))  # stops the attack if the bound fails
    with running(CallScope.admit(capped, run_id="run_alice_bound")):
        run_workflow(
            {"workflow": wf, "agents": agents}, registry=registry, executor=executor,
            run_id="run_alice_bound", user_input="visit",
            payload={"customers": [{"customer": f"c{i}"} for i in range(6)]},
        )  # fmt: skip
    executor.close()
    assert len(_flow_tools.CALLS) <= 3, f"{len(_flow_tools.CALLS)} iterations ran; maxIterations is 3"
