"""The run viewer's routes (`echo_tools.api.ui`) and queries (`echo_tools.history.browse`), without a
browser: the page, its files and headers, the data routes, the stream, the key, bad input, PostgreSQL.
The page itself in a real Chromium: test_ui_browser.py."""

from __future__ import annotations

import contextlib
import json
import re
import sqlite3
import tomllib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import ToolExecutor
from echo_tools.api import create_app
from echo_tools.events import ToolEvent
from echo_tools.history import RunHistory
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support

ROOT = Path(__file__).resolve().parents[2]
UI = ROOT / "echo_tools" / "ui"
KEY = "viewer-test-key-123"


def record_run(
    history: Any,
    run_id: str,
    *,
    workflow_id: str | None = "wf_a",
    status: str = "completed",
    calls: list[tuple[str | None, str | None, bool]] = (),  # (agent_id, agent_name, failed)
    run_of_events: str | None = None,
    owner: str | None = None,
) -> None:
    """A recorded run with one invoked and one closing event per call (its events under `run_of_events`),
    started by `owner` (None: the operator)."""
    history.start_run(run_id, {"source": {}, **({"owner": owner} if owner else {})}, workflow_id)
    for number, (agent_id, agent_name, failed) in enumerate(calls):
        fields = {
            "tool_id": "tool_echo",
            "tool_name": "Echo",
            "run_id": run_of_events or run_id,
            "agent_id": agent_id,
            "agent_name": agent_name,
            "call_id": f"{run_id}-{number}",
        }
        history.record(ToolEvent("tool.invoked", input={"text": f"call {number}"}, **fields))
        closing = "tool.failed" if failed else "tool.completed"
        history.record(ToolEvent(closing, output={"echo": number}, duration_ms=2.0, **fields))
    history.set_status(run_id, status)


@pytest.fixture
def history(tmp_path: Path) -> Iterator[RunHistory]:
    history = RunHistory(tmp_path / "tools")
    yield history
    history.close()


def make_app(tmp_path: Path, history: Any, settings: ApiSettings | None = None) -> tuple[Any, ToolExecutor]:
    registry = support.make_registry(tmp_path / "tools", support.ECHO)
    executor = ToolExecutor(registry, event_sinks=[history] if history is not None else [])
    return create_app(registry, executor, settings or ApiSettings(), history=history), executor


@pytest.fixture
async def client(tmp_path: Path, history: RunHistory) -> AsyncIterator[httpx.AsyncClient]:
    app, executor = make_app(tmp_path, history)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        yield client
    await executor.aclose()


async def test_runs_are_listed_newest_first_with_their_calls_failures_and_agents(
    client: httpx.AsyncClient, history: RunHistory
) -> None:
    record_run(history, "run_old", calls=[("adder", "Adder", False)])
    record_run(
        history, "run_new", status="failed", calls=[("adder", "Adder", False), ("checker", "Checker", True)]
    )

    answer = (await client.get("/ui/api/runs")).json()

    assert [r["run_id"] for r in answer["runs"]] == ["run_new", "run_old"]
    newest = answer["runs"][0]
    assert (newest["status"], newest["calls"], newest["failed"]) == ("failed", 2, 1)
    assert sorted((a["agent_id"], a["agent_name"]) for a in newest["agents"]) == [
        ("adder", "Adder"),
        ("checker", "Checker"),
    ]
    assert answer["total"] == 2 and answer["next"] is None
    assert "interrupted" in answer["statuses"]


@pytest.mark.parametrize("rare_below", [2_000, 1], ids=["agent-of-few-events", "agent-of-many-events"])
async def test_runs_are_filtered_by_status_workflow_and_agent(
    client: httpx.AsyncClient, history: RunHistory, rare_below: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("echo_tools.history.browse.RARE_AGENT_EVENTS", rare_below)
    record_run(history, "run_1", workflow_id="wf_a", status="completed", calls=[("adder", "Adder", False)])
    record_run(history, "run_2", workflow_id="wf_b", status="interrupted", calls=[("gate", "Gate", False)])
    record_run(history, "run_3", workflow_id="wf_a", status="interrupted", calls=[("adder", "Adder", False)])

    async def ids(**params: str) -> list[str]:
        answer = (await client.get("/ui/api/runs", params=params)).json()
        return [r["run_id"] for r in answer["runs"]]

    assert await ids(status="interrupted") == ["run_3", "run_2"]
    assert await ids(workflow_id="wf_a") == ["run_3", "run_1"]
    assert await ids(agent_id="adder") == ["run_3", "run_1"]
    assert await ids(agent_id="adder", status="completed") == ["run_1"]
    assert await ids(agent_id="nobody") == []
    total = (await client.get("/ui/api/runs", params={"agent_id": "adder"})).json()["total"]
    assert total == (2 if rare_below > 1 else None)  # a common agent's runs are not counted


async def test_the_next_cursor_pages_through_every_run_once(
    client: httpx.AsyncClient, history: RunHistory
) -> None:
    for number in range(7):
        record_run(history, f"run_{number}")
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "3", **({"before": cursor} if cursor else {})}
        page = (await client.get("/ui/api/runs", params=params)).json()
        seen += [r["run_id"] for r in page["runs"]]
        cursor = page["next"]
        if cursor is None:
            break

    assert seen == [f"run_{n}" for n in reversed(range(7))]


async def test_a_run_answers_its_events_and_those_of_its_sub_runs_only(
    client: httpx.AsyncClient, history: RunHistory
) -> None:
    record_run(history, "run_x", calls=[("adder", "Adder", False)])
    # a workflow tool's sub-run, and two runs whose ids only start like it
    record_run(
        history,
        "sub",
        workflow_id=None,
        calls=[("inner", "Inner", False)],
        run_of_events="run_x/tool_wf/ab12",
    )
    record_run(history, "run_x2", calls=[(None, None, False)])
    record_run(history, "run_x.", calls=[(None, None, False)])

    answer = (await client.get("/ui/api/runs/run_x")).json()

    assert answer["run"]["run_id"] == "run_x" and answer["run"]["status"] == "completed"
    assert {e["run_id"] for e in answer["events"]} == {"run_x", "run_x/tool_wf/ab12"}
    assert [e["type"] for e in answer["events"]] == ["tool.invoked", "tool.completed"] * 2
    assert answer["truncated"] is False
    listed = (await client.get("/ui/api/runs")).json()["runs"]
    assert next(r for r in listed if r["run_id"] == "run_x")["calls"] == 2  # its sub-run's call counts


async def test_an_unknown_run_is_404_naming_it(client: httpx.AsyncClient) -> None:
    response = await client.get("/ui/api/runs/run_nowhere")

    assert response.status_code == 404
    body = response.json()
    assert body["error_type"] == "not_found" and body["field"] == "run_id"
    assert "'run_nowhere'" in body["message"]


@pytest.mark.parametrize(
    ("params", "field", "named"),
    [
        ({"status": "finished"}, "status", "'finished'"),
        ({"limit": "0"}, "limit", "'0'"),
        ({"limit": "many"}, "limit", "'many'"),
        ({"limit": "201"}, "limit", "'201'"),
        ({"before": "not-a-cursor"}, "before", "'not-a-cursor'"),
    ],
)
async def test_bad_filters_are_422_naming_the_field_and_the_value(
    client: httpx.AsyncClient, params: dict[str, str], field: str, named: str
) -> None:
    response = await client.get("/ui/api/runs", params=params)

    assert response.status_code == 422
    assert response.json()["field"] == field
    assert named in response.json()["message"]


async def test_without_a_history_the_data_routes_answer_404_and_the_page_still_loads(tmp_path: Path) -> None:
    app, executor = make_app(tmp_path, None)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        runs = await client.get("/ui/api/runs")
        page = await client.get("/ui/")
    await executor.aclose()

    assert runs.status_code == 404 and runs.json()["error_type"] == "not_found"
    assert "keeps no run history" in runs.json()["message"]
    assert page.status_code == 200


async def test_the_page_asked_without_the_key_is_401_and_holds_no_data(
    tmp_path: Path, history: RunHistory
) -> None:
    record_run(history, "run_secret_name", calls=[("adder", "Adder", False)])
    app, executor = make_app(tmp_path, history, ApiSettings(api_key=KEY))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        page = await client.get("/ui/")
        wrong = await client.get("/ui/", headers={"X-API-Key": "wrong-key-0000"})
        keyed = await client.get("/ui/", headers={"X-API-Key": KEY})
        data = await client.get("/ui/api/runs")
        script = await client.get("/ui/app.js")
        stream = await client.get("/ui/api/stream")
        listed = await client.get("/ui/api/runs", headers={"X-API-Key": KEY})
    await executor.aclose()

    assert page.status_code == 401 and wrong.status_code == 401
    assert "run_secret_name" not in page.text and 'id="login-form"' in page.text
    assert keyed.status_code == 200 and keyed.text == page.text  # the page holds no data either way
    assert data.status_code == 401 and stream.status_code == 401
    assert data.json()["error_type"] == "unauthorized"
    assert script.status_code == 200  # code, no data: the login form needs it
    assert listed.json()["runs"][0]["run_id"] == "run_secret_name"


async def test_the_page_runs_only_its_own_files(client: httpx.AsyncClient) -> None:
    page = await client.get("/ui/")
    redirect = await client.get("/ui")
    unknown = await client.get("/ui/secrets.txt")

    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy and "unsafe-inline" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert re.findall(r'(?:src|href)="([^"#]+)"', page.text) == ["favicon.svg", "app.css", "app.js"]
    for name in ("app.js", "app.css", "favicon.svg"):
        served = await client.get(f"/ui/{name}")
        assert served.status_code == 200 and served.content == (UI / name).read_bytes()
    assert redirect.status_code == 307 and redirect.headers["location"] == "ui/"
    assert unknown.status_code == 404 and "'secrets.txt'" in unknown.json()["message"]


def test_the_viewer_script_never_writes_markup_and_loads_nothing_from_elsewhere() -> None:
    script = (UI / "app.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
    for name in ("index.html", "app.js", "app.css"):
        assert not re.search(r"https?://", (UI / name).read_text()), name


def test_every_viewer_file_is_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["echo_tools"]
    shipped = {p.name for p in UI.iterdir() if any(p.match(pattern) for pattern in patterns)}

    assert shipped == {p.name for p in UI.iterdir()} and "app.js" in shipped


def test_the_viewers_queries_read_through_indexes(history: RunHistory) -> None:
    record_run(history, "run_a", calls=[("adder", "Adder", False)])
    history.browser.run_page(agent_id="adder")  # makes the indexes
    plans = {
        "page": "SELECT run_id FROM runs ORDER BY created DESC, run_id DESC LIMIT 51",
        "agent": "SELECT 1 FROM events e WHERE e.run_id = 'run_a' AND e.agent_id = 'adder'",
        "calls": "SELECT agent_id, type, COUNT(*) FROM events WHERE (run_id = 'a' OR (run_id > 'a/' AND"
        " run_id < 'a0')) GROUP BY agent_id, type",
        "changed": "SELECT run_id FROM runs WHERE updated > '2026' ORDER BY updated LIMIT 200",
    }
    with contextlib.closing(sqlite3.connect(history.path)) as db:
        for name, sql in plans.items():
            plan = " ".join(row[-1] for row in db.execute("EXPLAIN QUERY PLAN " + sql))
            assert "INDEX" in plan and not re.search(r"SCAN (runs|events)(?! USING)", plan), (name, plan)


def test_the_viewers_queries_on_postgresql(dsn: str) -> None:
    from echo_tools.pg.history import PgRunHistory

    history = PgRunHistory(dsn)
    try:
        record_run(history, "run_%_!", calls=[("adder", "Adder", False)])
        record_run(
            history, "sub", workflow_id=None, calls=[("inner", None, True)], run_of_events="run_%_!/t/1"
        )
        record_run(history, "run_%_!x", calls=[(None, None, False)])  # starts like it: not its sub-run
        record_run(history, "run_ab!x", calls=[(None, None, False)])  # what '%' and '_' would match
        browser = history.browser

        page = browser.run_page(agent_id="adder")
        bodies, truncated = browser.run_events_json("run_%_!")
        changed = browser.runs_changed("2000-01-01T00:00:00Z")
    finally:
        history.close()

    assert [r["run_id"] for r in page["runs"]] == ["run_%_!"]
    assert (page["runs"][0]["calls"], page["runs"][0]["failed"]) == (2, 1)
    assert {json.loads(b)["run_id"] for b in bodies} == {"run_%_!", "run_%_!/t/1"} and not truncated
    assert {r["run_id"] for r in changed} == {"run_%_!", "sub", "run_%_!x", "run_ab!x"}


def test_the_stream_sends_a_runs_tool_events_and_its_status_change(
    tmp_path: Path, history: RunHistory
) -> None:
    record_run(history, "run_live", status="running")
    app, executor = make_app(tmp_path, history)
    frames: list[tuple[str, dict[str, Any]]] = []
    with support.serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=30) as http:
        since = http.get("/ui/api/runs").json()["now"]
        with http.stream("GET", "/ui/api/stream", params={"run_id": "run_live", "since": since}) as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: ready"
            for run_id in ("run_live", "run_other", "run_live/tool_wf/1"):
                http.post("/tools/invoke/Echo", params={"run_id": run_id}, json={"text": f"<b>{run_id}</b>"})
            history.set_status("run_live", "completed")
            kind = None
            for line in lines:
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: ") and kind not in (None, "ready"):
                    frames.append((kind, json.loads(line[6:])))
                    if kind == "run":
                        break
    executor.close()

    tool_runs = [data["run_id"] for kind, data in frames if kind == "tool.completed"]
    assert tool_runs == ["run_live", "run_live/tool_wf/1"]
    assert frames[-1][1]["run_id"] == "run_live" and frames[-1][1]["status"] == "completed"


def test_mount_serves_the_viewer_in_the_hosts_app(tmp_path: Path) -> None:
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from workflow_bridge.echoai import mount

    app = FastAPI()
    layer = mount(app, storage_dir=tmp_path / "store", api_key=KEY)
    record_run(layer.history, "run_mounted")
    with TestClient(app, base_url="http://echoai.example") as http:
        page = http.get("/ui/")
        runs = http.get("/ui/api/runs", headers={"X-API-Key": KEY})

    assert page.status_code == 401 and "run_mounted" not in page.text
    assert [r["run_id"] for r in runs.json()["runs"]] == ["run_mounted"]


async def test_the_data_routes_need_the_history_action_and_the_page_none(
    tmp_path: Path, history: RunHistory
) -> None:
    from echo_tools.gate import Grants, Principal, hash_key
    from tests.echo_tools.test_gate_routes import declared_actions

    record_run(history, "run_watched", owner="reader")  # a principal reads its own runs only
    principals = {
        hash_key("reader-key-1234"): Principal("reader", Grants(actions=["history"])),
        hash_key("runner-key-1234"): Principal("runner", Grants(actions=["run"])),
    }
    app, executor = make_app(tmp_path, history, ApiSettings(principals=principals))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
    ) as client:
        read = await client.get("/ui/api/runs", headers={"X-API-Key": "reader-key-1234"})
        refused = await client.get("/ui/api/runs/run_watched", headers={"X-API-Key": "runner-key-1234"})
        page = await client.get("/ui/", headers={"X-API-Key": "runner-key-1234"})
    await executor.aclose()

    assert read.status_code == 200 and read.json()["runs"][0]["run_id"] == "run_watched"
    assert refused.status_code == 403
    assert "'runner'" in refused.json()["message"] and "'history'" in refused.json()["message"]
    assert page.status_code == 200  # the page holds no data: the routes it reads answer 403
    found = declared_actions(app)
    assert {found[f"GET /ui/api/{path}"] == {"history"} for path in ("runs", "runs/{run_id}", "stream")} == {
        True
    }
    assert found["GET /ui/"] == found["GET /ui/{name}"] == {"public"}
