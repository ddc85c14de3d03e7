"""Red-team review of issue 34: a run's scope reaches every agent of a node, whatever thread runs it, and
no request's scope reaches another's. `CrewAIAdapter.create_parallel_crew_node` (EchoAI's parallel crew)
runs its agents on a `ThreadPoolExecutor`, which does not carry the context variables the scope lives in;
EchoAI's middleware (`workflow_bridge.echoai._carry_the_user`) sets one per request. Real CrewAI agents
with the rehearsal model, a real uvicorn server.

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


@pytest.mark.xfail(
    strict=True,
    reason="create_parallel_crew_node runs its agents with ThreadPoolExecutor.map, which does not copy "
    "the context: their tool calls find no scope (current_scope() is None) and run as nobody, with no "
    "ceiling and no budget (two calls under a budget of one)",
)
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


# -- EchoAI's middleware carrying the logged-in user -------------------------------------------------


async def test_the_echoai_user_middleware_keeps_each_request_s_user_to_itself() -> None:
    """Held: `_carry_the_user` (workflow_bridge/echoai.py) sets the scope per request; concurrent requests
    of different users, async and sync routes (anyio's worker threads), and a later request without a
    user never see another request's user."""
    import asyncio

    import httpx
    from fastapi import FastAPI, Request

    from echo_tools.gate import current_scope
    from tests.echo_tools import _api_support as support
    from workflow_bridge.echoai import _carry_the_user

    app = FastAPI()

    def user_of(request: Request) -> str | None:
        return request.headers.get("x-user")

    @app.get("/async")
    async def on_loop() -> dict[str, str | None]:
        for _ in range(5):
            await asyncio.sleep(0)
        scope = current_scope()
        return {"user": scope.user_id if scope is not None else None}

    @app.get("/sync")
    def in_worker() -> dict[str, str | None]:
        scope = current_scope()
        return {"user": scope.user_id if scope is not None else None}

    _carry_the_user(app, user_of)
    with support.serve_in_thread(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            asks = [(path, f"u{n}") for n in range(12) for path in ("/async", "/sync")]
            answers = await asyncio.gather(*(http.get(p, headers={"x-user": u}) for p, u in asks))
            seen = [(p, a.json()["user"]) for (p, _), a in zip(asks, answers, strict=True)]
            later = [(await http.get(p)).json()["user"] for p in ("/async", "/sync") * 4]
    assert seen == asks
    assert later == [None] * 8
