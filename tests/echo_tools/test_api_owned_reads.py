"""Issue 35: reads are owned like writes. As an attacker holding one key of a server with two principals
(`alice`, `bob`, neither admin, each with every action) and the operator (admin): only
`GET /workflows/runs/{id}` checked the run's owner, so bob read alice's runs, calls, inputs and outputs
through the run viewer's data, the event history and the live event stream, and named her run as his
call's `run_id`. Now each read shows a principal its own (the operator sees all), filtered before any
limit, and a call may name only a run its principal owns (409 naming the owner, nothing recorded)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.credentials import SECRET_KEY_ENV, new_key
from echo_tools.executor import ToolExecutor
from echo_tools.gate import hash_key, principals_from
from echo_tools.history import RunHistory
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support

OPERATOR = {"X-API-Key": "operator-key-0123456789"}
ALICE = {"X-API-Key": "alice-key-0123456789"}
BOB = {"X-API-Key": "bob-key-0123456789"}
EVERY_ACTION = ["invoke", "run", "register", "import", "credentials", "mcp", "history", "approve", "compile"]
PRINCIPALS = principals_from(
    {
        "principals": [
            {"name": "alice", "key_sha256": hash_key(ALICE["X-API-Key"]), "actions": EVERY_ACTION},
            {"name": "bob", "key_sha256": hash_key(BOB["X-API-Key"]), "actions": EVERY_ACTION},
        ]
    }
)
SETTINGS = ApiSettings(api_key=OPERATOR["X-API-Key"], principals=PRINCIPALS, sse_ping_seconds=0.2)
SECRET = "alice-private-7f3"


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, RunHistory]]:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    registry = support.make_registry(tmp_path / "tools", support.ECHO)
    history = RunHistory(tmp_path / "tools")
    executor = ToolExecutor(registry, event_sinks=[history])
    app = create_app(registry, executor, SETTINGS, history=history)
    yield app, history
    executor.close()
    history.close()


@pytest.fixture
async def client(served: tuple[Any, RunHistory]) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=served[0])
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=30) as c:
        yield c


def record_run(history: RunHistory, run_id: str, owner: str) -> None:
    """A recorded workflow run as the runner records one (its owner kept with its source)."""
    assert history.start_run(run_id, {"source": {}, "owner": owner}, "wf_owned")


async def call(client: httpx.AsyncClient, who: dict[str, str], text: str, **query: str) -> httpx.Response:
    response = await client.post("/tools/invoke/tool_echo", json={"text": text}, params=query, headers=who)
    return response


# -- the event history -------------------------------------------------------------------------------------


async def test_the_event_history_shows_a_principal_only_its_own_calls(
    client: httpx.AsyncClient, served: tuple[Any, RunHistory]
) -> None:
    assert (await call(client, ALICE, SECRET, run_id="run-alice")).status_code == 200
    assert (await call(client, BOB, "bob-own")).status_code == 200
    served[1].flush()
    bobs = (await client.get("/tools/events/history", headers=BOB)).json()["events"]
    assert bobs and SECRET not in json.dumps(bobs)
    assert {e.get("principal") for e in bobs} == {"bob"}
    by_run = (await client.get("/tools/events/history", params={"run_id": "run-alice"}, headers=BOB)).json()
    assert by_run["events"] == []
    everyone = (await client.get("/tools/events/history", headers=OPERATOR)).text
    assert SECRET in everyone and "bob-own" in everyone  # an admin sees all


async def test_the_event_history_filters_before_it_limits(
    client: httpx.AsyncClient, served: tuple[Any, RunHistory]
) -> None:
    for index in range(12):
        assert (await call(client, ALICE, f"{SECRET}-{index}")).status_code == 200
    assert (await call(client, BOB, "bob-after-alice")).status_code == 200
    served[1].flush()
    page = (await client.get("/tools/events/history", params={"limit": "5"}, headers=BOB)).json()["events"]
    assert [e["type"] for e in page] == ["tool.invoked", "tool.completed"]  # bob's one call, oldest first
    assert page[0]["input"] == {"text": "bob-after-alice"}


# -- the live event stream ---------------------------------------------------------------------------------


async def frames_until(lines: AsyncIterator[str], marker: str) -> list[dict[str, Any]]:
    """The SSE frames of a stream's lines up to the first whose data holds `marker` (bounded by the
    caller)."""
    frames: list[dict[str, Any]] = []
    frame: dict[str, Any] = {}
    async for line in lines:
        if not line:
            if frame:
                frames.append(frame)
                if marker in json.dumps(frame.get("data")):
                    return frames
            frame = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            frame[name] = json.loads(value) if name == "data" else value
    return frames


def stream_server(app: Any) -> Any:
    return support.serve_in_thread(app)


def test_the_live_event_stream_shows_a_principal_only_its_own_calls(served: tuple[Any, RunHistory]) -> None:
    with stream_server(served[0]) as url:

        async def scenario() -> list[dict[str, Any]]:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                async with http.stream("GET", "/tools/events", headers=BOB) as stream:
                    assert stream.status_code == 200
                    lines = stream.aiter_lines()
                    assert (await anext(lines)).startswith("event: ready")
                    assert (await call(http, ALICE, SECRET)).status_code == 200
                    assert (await call(http, BOB, "bob-sentinel")).status_code == 200
                    return await asyncio.wait_for(frames_until(lines, "bob-sentinel"), 30)

        frames = asyncio.run(scenario())
    assert frames and "bob-sentinel" in json.dumps(frames[-1])
    assert SECRET not in json.dumps(frames)


# -- the run viewer's data ---------------------------------------------------------------------------------


async def test_the_viewer_lists_a_principal_only_its_own_runs(
    client: httpx.AsyncClient, served: tuple[Any, RunHistory]
) -> None:
    record_run(served[1], "run-of-alice", "alice")
    record_run(served[1], "run-of-bob", "bob")
    for index in range(3):
        record_run(served[1], f"run-of-alice-{index}", "alice")
    page = (await client.get("/ui/api/runs", params={"limit": "2"}, headers=BOB)).json()
    assert [r["run_id"] for r in page["runs"]] == ["run-of-bob"]  # filtered before the page's limit
    assert page["total"] == 1 and page["next"] is None
    waiting = (await client.get("/ui/api/runs", params={"status": "running"}, headers=BOB)).json()
    assert [r["run_id"] for r in waiting["runs"]] == ["run-of-bob"]
    everyone = (await client.get("/ui/api/runs", headers=OPERATOR)).json()
    assert everyone["total"] == 5


async def test_another_principal_s_run_is_not_shown_to_the_viewer(
    client: httpx.AsyncClient, served: tuple[Any, RunHistory]
) -> None:
    record_run(served[1], "run-of-alice", "alice")
    assert (await call(client, ALICE, SECRET, run_id="run-of-alice")).status_code == 200
    assert (await call(client, ALICE, SECRET, run_id="direct-of-alice")).status_code == 200
    served[1].flush()
    refused = await client.get("/ui/api/runs/run-of-alice", headers=BOB)
    assert refused.status_code == 409 and refused.json()["error_type"] == "owned", refused.text
    assert "'alice'" in refused.json()["message"] and SECRET not in refused.text
    direct = await client.get("/ui/api/runs/direct-of-alice", headers=BOB)  # events only, no recorded run
    assert direct.status_code == 409 and "'alice'" in direct.json()["message"] and SECRET not in direct.text
    mine = await client.get("/ui/api/runs/run-of-alice", headers=ALICE)
    assert mine.status_code == 200 and SECRET in mine.text
    admin = await client.get("/ui/api/runs/direct-of-alice", headers=OPERATOR)
    assert admin.status_code == 200 and SECRET in admin.text


async def test_the_viewer_s_stream_of_another_principal_s_run_is_refused(
    client: httpx.AsyncClient, served: tuple[Any, RunHistory]
) -> None:
    record_run(served[1], "run-of-alice", "alice")
    async with client.stream(
        "GET", "/ui/api/stream", params={"run_id": "run-of-alice"}, headers=BOB
    ) as refused:
        assert refused.status_code == 409  # not a stream of her run's events
        assert "'alice'" in json.loads(await refused.aread())["message"]


def test_the_viewer_s_stream_shows_only_the_principal_s_own_run_changes(
    served: tuple[Any, RunHistory],
) -> None:
    app, history = served
    record_run(history, "run-of-alice", "alice")
    record_run(history, "run-of-bob", "bob")  # changed after alice's: its frame comes last
    with stream_server(app) as url:

        async def scenario() -> list[dict[str, Any]]:
            async with httpx.AsyncClient(base_url=url, timeout=30) as http:
                query = {"since": "2000-01-01T00:00:00Z"}
                async with http.stream("GET", "/ui/api/stream", params=query, headers=BOB) as stream:
                    assert stream.status_code == 200
                    return await asyncio.wait_for(frames_until(stream.aiter_lines(), "run-of-bob"), 30)

        frames = asyncio.run(scenario())
    runs = [f["data"]["run_id"] for f in frames if f.get("event") == "run"]
    assert runs == ["run-of-bob"]


# -- credentials ---------------------------------------------------------------------------------------


async def test_the_credentials_list_shows_a_principal_only_its_own(client: httpx.AsyncClient) -> None:
    stored = await client.post(
        "/tools/credentials",
        json={"name": "alice-cred", "credential": {"type": "bearer", "token": "t-alice"}},
        headers=ALICE,
    )
    assert stored.status_code == 200, stored.text
    bobs = await client.get("/tools/credentials", headers=BOB)
    assert bobs.status_code == 200 and "alice-cred" not in bobs.text
    alices = await client.get("/tools/credentials", headers=ALICE)
    assert [c["name"] for c in alices.json()] == ["alice-cred"]
    assert "alice-cred" in (await client.get("/tools/credentials", headers=OPERATOR)).text


# -- a call names only a run its principal owns -----------------------------------------------------------


@pytest.mark.parametrize("path", ["/tools/invoke/tool_echo", "/tools/invoke/id/tool_echo"])
async def test_a_call_may_not_name_another_principal_s_run(
    client: httpx.AsyncClient, served: tuple[Any, RunHistory], path: str
) -> None:
    history = served[1]
    record_run(history, "run-of-alice", "alice")
    assert (await call(client, ALICE, SECRET, run_id="direct-of-alice")).status_code == 200
    history.flush()
    before = history.count()
    for run_id in ("run-of-alice", "direct-of-alice", "run-of-alice/sub/1"):
        response = await client.post(path, json={"text": "bob-in"}, params={"run_id": run_id}, headers=BOB)
        assert response.status_code == 409, (run_id, response.text)
        assert response.json()["error_type"] == "owned" and response.json()["field"] == "query.run_id"
        assert "'alice'" in response.json()["message"] and "'bob'" in response.json()["message"]
    history.flush()
    assert history.count() == before  # nothing added to her run's history
    own = await client.post(path, json={"text": "alice-in"}, params={"run_id": "run-of-alice"}, headers=ALICE)
    assert own.status_code == 200
    admin = await client.post(path, json={"text": "op"}, params={"run_id": "run-of-alice"}, headers=OPERATOR)
    assert admin.status_code == 200
    fresh = await client.post(path, json={"text": "bob"}, params={"run_id": "bob-new-run"}, headers=BOB)
    assert fresh.status_code == 200


ONE_CALL = {
    "workflow": {"workflow_id": "wf_one", "name": "One", "execution_model": "sequential",
                 "agents": ["agt_one"], "connections": []},
    "agents": {"agt_one": {"agent_id": "agt_one", "name": "Echoer", "role": "Echoer", "goal": "echo",
                           "prompt": "Call the echo tool.", "tools": ["tool_echo"],
                           "metadata": {"node_type": "Agent"}}},
}  # fmt: skip


async def test_a_workflow_run_may_not_take_the_id_of_another_principal_s_run(
    client: httpx.AsyncClient, served: tuple[Any, RunHistory]
) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
        import workflow_bridge.runner  # noqa: F401

    history = served[1]
    record_run(history, "run-of-alice", "alice")
    assert (await call(client, ALICE, SECRET, run_id="direct-of-alice")).status_code == 200
    history.flush()
    before = history.count()
    for run_id in ("run-of-alice", "direct-of-alice"):
        response = await client.post("/workflows/run", json={**ONE_CALL, "run_id": run_id}, headers=BOB)
        assert response.status_code == 409, (run_id, response.text)
        assert response.json()["error_type"] == "owned" and "'alice'" in response.json()["message"]
    history.flush()
    assert history.count() == before


async def test_the_approvals_list_shows_a_principal_its_own_filtered_before_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = support.local_tool("Asked Echo", "echo", {"text": {"type": "string"}}, approval="always")
    registry = support.make_registry(tmp_path / "tools", asked)
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, SETTINGS)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        for index in range(12):
            parked = await client.post(
                "/tools/invoke/tool_asked_echo", json={"text": f"{SECRET}-{index}"}, headers=ALICE
            )
            assert parked.status_code == 202, parked.text
        mine = await client.post("/tools/invoke/tool_asked_echo", json={"text": "bob's"}, headers=BOB)
        bobs = (await client.get("/tools/approvals", params={"limit": "5"}, headers=BOB)).json()["approvals"]
        alices = (await client.get("/tools/approvals", params={"limit": "5"}, headers=ALICE)).json()[
            "approvals"
        ]
        everyone = (await client.get("/tools/approvals", headers=OPERATOR)).json()["approvals"]
    await executor.aclose()
    assert [a["approval_id"] for a in bobs] == [mine.json()["result"]["metadata"]["approval_id"]]
    assert len(alices) == 5 and SECRET not in json.dumps(bobs)
    assert len(everyone) == 13  # an admin sees every principal's
