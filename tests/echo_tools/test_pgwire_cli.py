"""The run history wired into the CLI and the API (embedded store): `runs`, `events`, the history route,
`--history-days`, a taken port, and a database URL that cannot be used."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import ToolExecutor, ToolRegistry
from echo_tools.api import create_app
from echo_tools.events import ToolEvent
from echo_tools.history import RunHistory
from echo_tools.settings import ApiSettings
from tests.echo_tools._cli_support import InProcessCli
from tests.echo_tools._pg_support import free_port

CALC = json.dumps({"operation": "add", "values": [1, 2]})


def test_invoke_keeps_its_events_and_runs_and_events_read_them(run_cli: InProcessCli, tmp_path: Path) -> None:
    assert run_cli(tmp_path, "invoke", "calculator", "--input", CALC, "--run-id", "r1").returncode == 0
    assert run_cli(tmp_path, "invoke", "calculator", "--input", "{}", "--run-id", "r2").returncode == 1

    runs = run_cli(tmp_path, "runs")
    assert runs.returncode == 0, runs.stderr
    lines = runs.stdout.splitlines()
    assert lines[0].split() == ["RUN_ID", "WORKFLOW", "STATUS", "CALLS", "FAILED", "LAST_EVENT"]
    assert lines[1].split()[:5] == ["r2", "-", "-", "0", "1"]  # newest first, refused before it ran
    assert lines[2].split()[:5] == ["r1", "-", "-", "1", "0"]
    assert lines[-1] == "2 runs"
    as_json = json.loads(run_cli(tmp_path, "runs", "--json").stdout)
    assert [r["run_id"] for r in as_json["runs"]] == ["r2", "r1"]

    shown = run_cli(tmp_path, "events", "--run", "r1")
    assert shown.returncode == 0, shown.stderr
    assert "tool.invoked" in shown.stdout and "tool.completed" in shown.stdout
    assert "run=r2" not in shown.stdout and shown.stdout.endswith("2 events\n")
    events = json.loads(run_cli(tmp_path, "events", "--run", "r1", "--json").stdout)["events"]
    assert [e["type"] for e in events] == ["tool.completed", "tool.invoked"]  # newest first
    assert events[0]["output"]["result"] == 3
    oldest = json.loads(run_cli(tmp_path, "events", "--run", "r1", "--oldest-first", "--json").stdout)
    assert [e["type"] for e in oldest["events"]] == ["tool.invoked", "tool.completed"]
    by_tool = json.loads(run_cli(tmp_path, "events", "--tool", "tool_calculator", "--json").stdout)
    assert {e["run_id"] for e in by_tool["events"]} == {"r1", "r2"}
    limited = json.loads(run_cli(tmp_path, "events", "--limit", "1", "--json").stdout)
    assert [e["run_id"] for e in limited["events"]] == ["r2"]  # the latest event
    assert (tmp_path / "runs.sqlite").is_file()


def test_the_jsonl_file_mode_of_events_still_works(run_cli: InProcessCli, tmp_path: Path) -> None:
    log = tmp_path / "calls.jsonl"
    run_cli(tmp_path, "invoke", "calculator", "--input", CALC, "--run-id", "r1", "--events", str(log))
    run_cli(tmp_path, "invoke", "calculator", "--input", CALC, "--run-id", "r2", "--events", str(log))
    shown = run_cli(tmp_path, "events", str(log), "--run-id", "r2")
    assert shown.returncode == 0 and shown.stdout.endswith("2 events\n")
    assert "run=r1" not in shown.stdout
    assert run_cli(tmp_path, "events", str(log), "--run", "r1").stdout.endswith("2 events\n")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("events", "--limit", "0"), "--limit: limit must be an integer from 1 to 10000, got 0"),
        (("events", "--limit", "10001"), "got 10001"),
        (("events", "--since", "yesterday"), "--since: since must be an ISO 8601 time"),
        (("runs", "--limit", "-3"), "--limit: limit must be an integer from 1 to 10000, got -3"),
        (("--history-days", "0", "runs"), "--history-days must be a positive number of days, got 0.0"),
        (("--history-days", "-1", "invoke", "calculator"), "--history-days must be a positive number"),
        (("events", "x.jsonl", "--tool", "t"), "events --tool reads the run history"),
        (("events", "x.jsonl", "--limit", "5"), "events --limit and --json read the run history"),
    ],
)
def test_bad_history_options_are_usage_errors_naming_the_option(
    run_cli: InProcessCli, tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    result = run_cli(tmp_path, *args)
    assert result.returncode == 2
    assert named in result.stderr
    assert "yesterday" in result.stderr or "yesterday" not in args


def test_history_days_prunes_old_events_at_start(run_cli: InProcessCli, tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    try:
        old = ToolEvent("tool.invoked", tool_id="t", run_id="old", timestamp="2020-01-01T00:00:00.000000Z")
        history.record(old)
        history.record(ToolEvent("tool.invoked", tool_id="t", run_id="new"))
    finally:
        history.close()
    kept = json.loads(run_cli(tmp_path, "--history-days", "30", "events", "--json").stdout)["events"]
    assert [e["run_id"] for e in kept] == ["new"]


# -- GET /tools/events/history -------------------------------------------------------------------------


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, RunHistory]]:
    registry = ToolRegistry(storage_dir=tmp_path / "tools")
    history = RunHistory(tmp_path)
    executor = ToolExecutor(registry, [history])
    app = create_app(registry, executor, ApiSettings(), history=history)
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            yield client, history
    finally:
        await executor.aclose()
        history.close()


def _record(history: RunHistory, count: int, **ids: Any) -> None:
    for n in range(count):
        history.record(ToolEvent("tool.completed", output={"n": n}, **ids))


async def test_history_route_answers_events_oldest_first_filtered(
    served: tuple[httpx.AsyncClient, RunHistory],
) -> None:
    client, history = served
    _record(history, 3, run_id="r1", tool_id="a", agent_id="x")
    _record(history, 2, run_id="r2", tool_id="b", agent_id="y")
    answer = await client.get("/tools/events/history", params={"run_id": "r1"})
    assert answer.status_code == 200
    events = answer.json()["events"]
    assert [e["output"]["n"] for e in events] == [0, 1, 2]
    assert {e["run_id"] for e in events} == {"r1"}
    by_tool = (await client.get("/tools/events/history", params={"tool_id": "b"})).json()["events"]
    assert [e["agent_id"] for e in by_tool] == ["y", "y"]
    by_agent = (await client.get("/tools/events/history", params={"agent_id": "x", "limit": "2"})).json()
    assert [e["output"]["n"] for e in by_agent["events"]] == [0, 1]
    since = (await client.get("/tools/events/history", params={"since": "2000-01-01T00:00:00Z"})).json()
    assert len(since["events"]) == 5
    future = (await client.get("/tools/events/history", params={"since": "2999-01-01T00:00:00+02:00"})).json()
    assert future == {"events": []}


async def test_history_route_limit_defaults_to_100(served: tuple[httpx.AsyncClient, RunHistory]) -> None:
    client, history = served
    _record(history, 120, run_id="r")
    events = (await client.get("/tools/events/history")).json()["events"]
    assert len(events) == 100 and events[0]["output"] == {"n": 0}
    all_of_them = (await client.get("/tools/events/history", params={"limit": "10000"})).json()["events"]
    assert len(all_of_them) == 120


@pytest.mark.parametrize(
    ("params", "field", "value"),
    [
        ({"limit": "0"}, "limit", "0"),
        ({"limit": "10001"}, "limit", "10001"),
        ({"limit": "ten"}, "limit", "'ten'"),
        ({"limit": "-5"}, "limit", "-5"),
        ({"since": "last tuesday"}, "since", "'last tuesday'"),
        ({"since": "2026-13-01"}, "since", "'2026-13-01'"),
    ],
)
async def test_history_route_refuses_bad_values_naming_the_field(
    served: tuple[httpx.AsyncClient, RunHistory], params: dict[str, str], field: str, value: str
) -> None:
    client, _ = served
    answer = await client.get("/tools/events/history", params=params)
    assert answer.status_code == 422
    body = answer.json()
    assert body["error_type"] == "validation"
    assert body["field"] == field
    assert field in body["message"] and value in body["message"]


async def test_history_route_without_a_history_says_none_is_kept(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, ApiSettings())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        answer = await c.get("/tools/events/history")
    await executor.aclose()
    assert answer.status_code == 404
    assert "keeps no event history" in answer.json()["message"]


# -- serve and the database URL ------------------------------------------------------------------------


def test_serve_on_a_taken_port_is_one_line_and_exit_1(run_cli: InProcessCli, tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli(tmp_path, "serve", "--port", str(port))
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"echo-tools: error: serve: port {port} on 127.0.0.1 is already in use by another process; "
        "stop it or choose another --port"
    ]
    assert "serving" not in result.stderr


def test_an_unreachable_database_names_host_and_database(run_cli: InProcessCli, tmp_path: Path) -> None:
    port = free_port()
    url = f"postgresql://echo:hunter2@127.0.0.1:{port}/catalogue"
    result = run_cli(tmp_path, "--database-url", url, "list")
    assert result.returncode == 2
    assert f"database 'catalogue' on host 127.0.0.1 port {port}" in result.stderr
    assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


def test_the_database_url_comes_from_the_environment_too(
    run_cli: InProcessCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = free_port()
    monkeypatch.setenv("ECHO_TOOLS_DATABASE_URL", f"postgresql://127.0.0.1:{port}/fromenv")
    result = run_cli(tmp_path, "runs")
    assert result.returncode == 2
    assert f"database 'fromenv' on host 127.0.0.1 port {port}" in result.stderr


@pytest.mark.parametrize("url", ["postgresql://u:s3cret@[bad/x y", "mysql://u:s3cret@h/db"])
def test_a_malformed_database_url_is_named_without_its_password(
    run_cli: InProcessCli, tmp_path: Path, url: str
) -> None:
    result = run_cli(tmp_path, "--database-url", url, "list")
    assert result.returncode == 2
    assert "--database-url: database URL" in result.stderr and "is invalid" in result.stderr
    assert "u:***@" in result.stderr
    assert "s3cret" not in result.stderr


def test_a_database_url_without_the_postgres_extra_says_what_to_install(
    run_cli: InProcessCli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    for name in [m for m in sys.modules if m.startswith("echo_tools.pg.") and m != "echo_tools.pg.wiring"]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    result = run_cli(tmp_path, "--database-url", "postgresql://127.0.0.1/echo", "list")
    assert result.returncode == 2
    assert "--database-url needs the postgres extra: pip install 'echo-tools[postgres]'" in result.stderr
    migrated = run_cli(tmp_path, "migrate", "--to", "postgresql://127.0.0.1/echo")
    assert migrated.returncode == 2 and "migrate needs the postgres extra" in migrated.stderr


def test_runs_shows_the_recorded_status_of_a_workflow_run(run_cli: InProcessCli, tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    try:
        history.start_run("wf-run", {"workflow": {}}, workflow_id="wf")
        history.record(ToolEvent("tool.invoked", tool_id="t", run_id="wf-run", workflow_id="wf"))
        history.set_status("wf-run", "interrupted")
    finally:
        history.close()
    shown = run_cli(tmp_path, "runs")
    assert shown.stdout.splitlines()[1].split()[:5] == ["wf-run", "wf", "interrupted", "1", "0"]
    only = json.loads(run_cli(tmp_path, "runs", "--workflow", "other", "--json").stdout)
    assert only == {"runs": []}
