"""Red-team review of issue 34 as a holder of one restricted key of a multi-principal `echo-tools serve`:
the run a call is counted in, and where the scope of the work running now is read.

Each `xfail(strict=True)` test is a finding (it asserts what should happen and fails on main today); the
other tests are attacks that held."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import ToolExecutor, ToolRegistry
from echo_tools.api import create_app
from echo_tools.errors import ToolConfigError
from echo_tools.gate import (
    CallScope,
    Grants,
    Principal,
    acting,
    acting_as,
    current_scope,
    hash_key,
    principals_from,
)
from echo_tools.history import RunHistory
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support

OPERATOR_KEY = {"X-API-Key": "operator-key-0123456789"}
ALICE = {"X-API-Key": "alice-key-0123456789"}
BOB = {"X-API-Key": "bob-key-0123456789"}
CAROL = {"X-API-Key": "carol-key-0123456789"}  # may read histories: her own runs' (only it or an admin)
PRINCIPALS = {
    "principals": [
        {
            "name": "alice",
            "key_sha256": hash_key(ALICE["X-API-Key"]),
            "actions": ["invoke", "run", "history"],
        },
        {"name": "bob", "key_sha256": hash_key(BOB["X-API-Key"]), "actions": ["invoke"]},
        {"name": "carol", "key_sha256": hash_key(CAROL["X-API-Key"]), "actions": ["history"]},
    ]
}


def echo(text: str) -> dict[str, Any]:
    """Say `text` back."""
    return {"said": text}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, RunHistory]]:
    """A server as `echo-tools serve --principals` makes it: the run history is a sink of every call."""
    registry = ToolRegistry(storage_dir=tmp_path / "tools")
    registry.add(echo)
    history = RunHistory(tmp_path / "tools")
    executor = ToolExecutor(registry, event_sinks=[history])
    settings = ApiSettings(api_key=OPERATOR_KEY["X-API-Key"], principals=principals_from(PRINCIPALS))
    app = create_app(registry, executor, settings, history=history)
    with support.serve_in_thread(app) as url:
        yield url, history
    executor.close()
    history.close()


def test_an_invoke_naming_another_principal_s_run_is_refused(served: tuple[str, RunHistory]) -> None:
    url, history = served
    assert history.start_run("run_alice_1", {"owner": "alice", "source": {}})  # alice's recorded run
    with httpx.Client(base_url=url, timeout=60) as http:
        answer = http.post(
            "/tools/invoke/echo", params={"run_id": "run_alice_1"}, json={"text": "bob was here"}, headers=BOB
        )
    history.flush()
    foreign = [e for e in history.run_events("run_alice_1") if e.principal == "bob"]
    assert foreign == [], f"bob's calls were recorded in alice's run: {[e.type for e in foreign]}"
    assert answer.status_code in (403, 409), answer.text


def test_an_invoke_naming_its_own_run_is_recorded_there(served: tuple[str, RunHistory]) -> None:
    """Held (and what the fix must keep): alice's call into her own run is counted there."""
    url, history = served
    assert history.start_run("run_alice_2", {"owner": "alice", "source": {}})
    with httpx.Client(base_url=url, timeout=60) as http:
        answer = http.post(
            "/tools/invoke/echo", params={"run_id": "run_alice_2"}, json={"text": "mine"}, headers=ALICE
        )
    assert answer.status_code == 200, answer.text
    history.flush()
    assert [e.principal for e in history.run_events("run_alice_2") if e.type == "tool.completed"] == ["alice"]


def test_a_restricted_key_cannot_read_or_resume_another_principal_s_run(
    served: tuple[str, RunHistory],
) -> None:
    """Held: bob (invoke only) is refused alice's run on every route that names it."""
    url, history = served
    assert history.start_run("run_alice_3", {"owner": "alice", "source": {}})
    with httpx.Client(base_url=url, timeout=60, headers=BOB) as http:
        read = http.get("/workflows/runs/run_alice_3")
        resumed = http.post("/workflows/runs/run_alice_3/resume", json={"decision": "approve"})
        approvals = http.get("/tools/approvals")
    assert read.status_code == 403 and resumed.status_code == 403 and approvals.status_code == 403
    with httpx.Client(base_url=url, timeout=60, headers=ALICE) as http:
        # alice has no `approve`: she may not resume even her own run
        assert (
            http.post("/workflows/runs/run_alice_3/resume", json={"decision": "approve"}).status_code == 403
        )


# -- the scope of the work running now --------------------------------------------------------------


def test_a_scope_does_not_leak_into_threads_started_without_its_context() -> None:
    """Held: a thread pool's worker (no context copied) and the next request's thread see no scope."""
    alice = Principal("alice", Grants(permissions=[], actions=("invoke",)))
    seen: list[Any] = []
    with ThreadPoolExecutor(1) as pool:
        with acting_as(alice):
            seen.append(pool.submit(current_scope).result())
        seen.append(pool.submit(current_scope).result())
    assert seen == [None, None]
    assert current_scope() is None


def test_a_thread_pool_worker_outside_any_scope_acts_as_the_operator() -> None:
    """What a path that hands work to a plain thread pool gets: the operator (admin), not the caller. Held
    today only because every such path of the product copies the context (anyio, asyncio.to_thread,
    LangGraph); a new one that does not is fail-open, so this documents the default."""
    alice = Principal("alice", Grants(permissions=[], actions=("invoke",)))
    with ThreadPoolExecutor(1) as pool, acting_as(alice):
        inside = pool.submit(lambda: acting().name).result()
        copied = pool.submit(contextvars.copy_context().run, lambda: acting().name).result()
    assert (inside, copied) == ("operator", "alice")


async def test_the_scope_of_one_task_is_not_the_scope_of_another() -> None:
    """Held: two concurrent tasks of one loop (two requests) each keep their own scope across awaits."""
    names: dict[str, list[str]] = {"alice": [], "bob": []}
    both = threading.Barrier(2)

    async def request(name: str) -> None:
        with acting_as(CallScope(Principal(name))):
            for _ in range(3):
                await asyncio.sleep(0)
                names[name].append(acting().name)
            await asyncio.to_thread(both.wait, 30)
            names[name].append(await asyncio.to_thread(lambda: acting().name))

    await asyncio.gather(request("alice"), request("bob"))
    assert names == {"alice": ["alice"] * 4, "bob": ["bob"] * 4}


# -- the operator's name ---------------------------------------------------------------------------


def test_a_restricted_principal_cannot_be_named_operator(tmp_path: Path) -> None:
    impostor = {"X-API-Key": "impostor-key-0123456789"}
    table = {
        "principals": [
            {"name": "operator", "key_sha256": hash_key(impostor["X-API-Key"]), "actions": ["history"]}
        ]
    }
    registry = ToolRegistry(storage_dir=tmp_path / "tools")
    history = RunHistory(tmp_path / "tools")
    assert history.start_run("run_of_the_cli", {"source": {}})  # `echo-tools run`: owned by the operator
    executor = ToolExecutor(registry, event_sinks=[history])
    try:
        settings = ApiSettings(api_key=OPERATOR_KEY["X-API-Key"], principals=principals_from(table))
        app = create_app(registry, executor, settings, history=history)
        with support.serve_in_thread(app) as url:
            read = httpx.get(f"{url}/workflows/runs/run_of_the_cli", headers=impostor, timeout=60)
    except ToolConfigError:
        return  # the fix: the principals file is refused, naming the reserved name
    finally:
        executor.close()
        history.close()
    assert read.status_code in (403, 409), f"the impostor read the operator's run: {read.status_code}"


# -- the budget's deadline ---------------------------------------------------------------------------


def wait_a_while(seconds: float) -> dict[str, Any]:
    """Work for `seconds`."""
    import time

    time.sleep(seconds)
    return {"waited": seconds}


def test_a_call_does_not_run_past_its_budget_s_deadline() -> None:
    from echo_tools import ToolContext
    from echo_tools.gate import Budget, BudgetMeter

    registry = ToolRegistry()
    registry.add(wait_a_while, timeout_ms=60_000)
    executor = ToolExecutor(registry)
    meter = BudgetMeter(Budget(deadline_s=0.2))
    result = executor.invoke_sync(
        "wait_a_while", {"seconds": 1.0}, ToolContext(principal="bob", budget=meter)
    )
    executor.close()
    assert not result.success, f"the call ran to its end, {-meter.remaining_s():.1f} s past the deadline"


# -- reading another principal's run -----------------------------------------------------------------


def _alice_s_run(url: str, history: RunHistory, run_id: str) -> None:
    assert history.start_run(run_id, {"owner": "alice", "source": {}})
    with httpx.Client(base_url=url, timeout=60, headers=ALICE) as http:
        answer = http.post("/tools/invoke/echo", params={"run_id": run_id}, json={"text": "alice's secret"})
    assert answer.status_code == 200, answer.text
    history.flush()


def test_the_workflows_route_refuses_another_principal_s_run(served: tuple[str, RunHistory]) -> None:
    """Held: GET /workflows/runs/{id} is the owner's (or an admin's): carol gets 409 `owned`."""
    url, history = served
    _alice_s_run(url, history, "run_alice_read_1")
    answer = httpx.get(f"{url}/workflows/runs/run_alice_read_1", headers=CAROL, timeout=60)
    assert answer.status_code == 409 and answer.json()["error_type"] == "owned", answer.text


@pytest.mark.parametrize(
    "path", ["/ui/api/runs/run_alice_read_2", "/tools/events/history?run_id=run_alice_read_2"]
)
def test_another_principal_s_run_is_not_readable_through_the_viewer_or_the_event_history(
    served: tuple[str, RunHistory], path: str
) -> None:
    url, history = served
    _alice_s_run(url, history, "run_alice_read_2")
    answer = httpx.get(f"{url}{path}", headers=CAROL, timeout=60)
    assert "alice's secret" not in answer.text, f"{path} showed carol alice's run ({answer.status_code})"


@pytest.mark.xfail(
    strict=True,
    reason="a run id is owned by the first principal whose call names it (api/owners.run_owner: 'else the "
    "principal whose call first named the id'), so an invoke-only key that names a run id first (bob: "
    "?run_id=) locks its real owner out: alice's run under that id is 409 'owned by bob', and bob's calls "
    "are that id's events and spent its per-run quota. A design question as much as a bug: client-chosen "
    "run ids (EchoAI's) can be claimed by anyone who guesses them",
)
def test_a_run_id_named_by_another_principal_s_call_does_not_lock_its_owner_out(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path / "tools")
    registry.add(echo)
    history = RunHistory(tmp_path / "tools")
    executor = ToolExecutor(registry, event_sinks=[history])
    settings = ApiSettings(api_key=OPERATOR_KEY["X-API-Key"], principals=principals_from(PRINCIPALS))
    app = create_app(registry, executor, settings, history=history)
    nodes = [{"id": 1, "type": "Start", "name": "Start"}, {"id": 2, "type": "End", "name": "End"}]
    canvas = {"workflow_name": "Empty", "canvas_nodes": nodes, "connections": [{"from": 1, "to": 2}]}
    with support.serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=120) as http:
        squat = http.post(
            "/tools/invoke/echo", params={"run_id": "run_alice_q"}, json={"text": "x"}, headers=BOB
        )
        assert squat.status_code == 200, squat.text
        with http.stream(
            "POST", "/workflows/run", json={**canvas, "run_id": "run_alice_q"}, headers=ALICE
        ) as run:
            run.read()
            started = run.status_code
    executor.close()
    history.close()
    assert started == 200, f"alice's run under her own id was refused ({started})"
