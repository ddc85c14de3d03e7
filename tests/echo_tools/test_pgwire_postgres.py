"""The CLI and `echo-tools serve` on a real PostgreSQL (`--database-url`): catalogue, history, runs, MCP
configs, credentials, `migrate` both ways, and two real `serve` replicas sharing history and events."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from echo_tools.pg import open_stores
from tests.echo_tools._cli_support import InProcessCli
from tests.echo_tools._pg_support import child_env, first_streamed_event, free_port, replicas_up

CALC = json.dumps({"operation": "add", "values": [2, 3]})
ROOT = Path(__file__).resolve().parents[2]


def test_the_cli_keeps_catalogue_and_history_in_the_database(
    run_cli: InProcessCli, tmp_path: Path, dsn: str
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    invoked = run_cli(
        first, "--database-url", dsn, "invoke", "calculator", "--input", CALC, "--run-id", "pg1"
    )
    assert invoked.returncode == 0, invoked.stderr
    assert json.loads(invoked.stdout)["output"]["result"] == 5

    # another machine's view: another folder, the same database
    listed = json.loads(run_cli(second, "--database-url", dsn, "list", "--json").stdout)
    assert "tool_calculator" in {t["tool_id"] for t in listed}
    runs = run_cli(second, "--database-url", dsn, "runs", "--json")
    assert runs.returncode == 0, runs.stderr
    assert [(r["run_id"], r["calls"], r["failed"]) for r in json.loads(runs.stdout)["runs"]] == [
        ("pg1", 1, 0)
    ]
    events = json.loads(
        run_cli(second, "--database-url", dsn, "events", "--run", "pg1", "--json", "--oldest-first").stdout
    )
    assert [e["type"] for e in events["events"]] == ["tool.invoked", "tool.completed"]
    assert not (first / "runs.sqlite").exists() and not (second / "runs.sqlite").exists()
    assert not list(first.glob("*.json")) if first.exists() else True

    bad = run_cli(second, "--database-url", dsn, "events", "--since", "soon")
    assert bad.returncode == 2 and "'soon'" in bad.stderr


def test_the_environment_variable_selects_the_database(
    run_cli: InProcessCli, tmp_path: Path, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_TOOLS_DATABASE_URL", dsn)
    assert run_cli(tmp_path, "invoke", "calculator", "--input", CALC, "--run-id", "env1").returncode == 0
    stores = open_stores(dsn)
    try:
        assert [e.type for e in stores.history.events(run_id="env1")] == ["tool.invoked", "tool.completed"]
    finally:
        stores.close()


def test_migrate_copies_a_json_store_into_postgresql_and_back(
    run_cli: InProcessCli, tmp_path: Path, dsn: str
) -> None:
    source, back = tmp_path / "json", tmp_path / "back"
    assert run_cli(source, "discover").returncode == 0
    (source / "mcp_servers.json").write_text(
        json.dumps({"mcpServers": {"files": {"transport": "stdio", "command": "python", "args": ["-V"]}}})
    )
    moved = run_cli(source, "--storage", str(source), "migrate", "--to", dsn)
    assert moved.returncode == 0, moved.stderr
    report = json.loads(moved.stdout)
    assert "tool_calculator" in report["written"] and report["mcp_servers"] == ["files"]
    assert report["problems"] == []

    in_db = json.loads(run_cli(tmp_path / "x", "--database-url", dsn, "list", "--json").stdout)
    assert {t["tool_id"] for t in in_db} >= set(report["written"])
    servers = run_cli(tmp_path / "x", "--database-url", dsn, "mcp", "list")
    assert servers.returncode == 0 and "files" in servers.stdout

    returned = run_cli(back, "migrate", "--from", dsn, "--to", str(back))
    assert returned.returncode == 0, returned.stderr
    assert set(json.loads(returned.stdout)["written"]) == set(report["written"])
    in_folder = json.loads(run_cli(back, "--storage", str(back), "list", "--json").stdout)
    assert {t["tool_id"] for t in in_folder} == set(report["written"])
    assert "files" in json.loads((back / "mcp_servers.json").read_text())["mcpServers"]


def test_migrate_exits_1_when_a_tool_could_not_be_copied(
    run_cli: InProcessCli, tmp_path: Path, dsn: str
) -> None:
    assert run_cli(tmp_path, "discover").returncode == 0
    (tmp_path / "broken_tool.json").write_text("{not json")
    result = run_cli(tmp_path, "--storage", str(tmp_path), "migrate", "--to", dsn)
    assert result.returncode == 1
    assert "broken_tool.json" in result.stdout and "problem" in result.stderr
    assert "tool_calculator" in json.loads(result.stdout)["written"]


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("migrate", "--to", "postgresql://127.0.0.1:{port}/gone"), "database 'gone' on host 127.0.0.1"),
        (("migrate", "--from", "/nowhere", "--to", "/elsewhere"), "one JSON store folder and one postgresql"),
    ],
)
def test_migrate_refuses_what_it_cannot_use(
    run_cli: InProcessCli, tmp_path: Path, args: tuple[str, ...], named: str
) -> None:
    port = free_port()
    result = run_cli(tmp_path, *(a.format(port=port) for a in args))
    assert result.returncode == 2
    assert named in result.stderr


def test_mcp_configs_are_kept_in_the_database(run_cli: InProcessCli, tmp_path: Path, dsn: str) -> None:
    stores = open_stores(dsn)
    try:
        stores.mcp_configs.put("remote", {"transport": "http", "url": "http://127.0.0.1:9/mcp"})
        shown = run_cli(tmp_path, "--database-url", dsn, "mcp", "list")
        assert shown.returncode == 0 and "remote" in shown.stdout
        removed = run_cli(tmp_path, "--database-url", dsn, "mcp", "remove", "remote")
        assert removed.returncode == 0, removed.stderr
        assert "remote" not in stores.mcp_configs.load()
        assert not (tmp_path / "mcp_servers.json").exists()
    finally:
        stores.close()


def test_credentials_are_kept_encrypted_in_the_database(
    run_cli: InProcessCli, tmp_path: Path, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cryptography.fernet import Fernet

    monkeypatch.setenv("ECHO_TOOLS_SECRET_KEY", Fernet.generate_key().decode())
    secret = tmp_path / "cred.json"
    secret.write_text(json.dumps({"type": "bearer", "token": "tok-very-secret-123"}))
    stored = run_cli(
        tmp_path / "a", "--database-url", dsn, "credentials", "set", "crm", "--from", str(secret)
    )
    assert stored.returncode == 0, stored.stderr
    listed = run_cli(tmp_path / "b", "--database-url", dsn, "credentials", "list")
    assert listed.returncode == 0 and "crm" in listed.stdout
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT name, entry::text FROM echo_credentials").fetchall()
    assert [name for name, _ in rows] == ["crm"] and "tok-very-secret-123" not in rows[0][1]
    assert not (tmp_path / "a" / "credentials.enc").exists()
    assert run_cli(tmp_path / "b", "--database-url", dsn, "credentials", "remove", "crm").returncode == 0
    assert "crm" not in run_cli(tmp_path / "a", "--database-url", dsn, "credentials", "list").stdout


# -- two real `echo-tools serve` processes on one database -----------------------------------------------


@pytest.fixture
def two_replicas(dsn: str, tmp_path: Path) -> Iterator[list[str]]:
    ports = [free_port(), free_port()]
    env = {**child_env(), "ECHO_TOOLS_DATABASE_URL": dsn, "NO_COLOR": "1"}
    env.pop("ECHO_TOOLS_API_KEY", None)
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "echo_tools.cli", "--storage", str(tmp_path / f"r{n}"), "serve"]
            + ["--port", str(port), "--log-level", "warning"],
            env=env,
            cwd=str(ROOT),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, port in enumerate(ports)
    ]
    urls = [f"http://127.0.0.1:{port}/tools" for port in ports]
    with replicas_up(children, urls, seconds=120):
        yield urls


def _invoke(url: str, run_id: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/invoke/calculator", params={"run_id": run_id}, json=json.loads(CALC), timeout=30
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_two_serve_replicas_share_history_and_event_stream(two_replicas: list[str]) -> None:
    first, second = two_replicas
    assert _invoke(first, "a-run")["output"]["result"] == 5
    history = httpx.get(f"{second}/events/history", params={"run_id": "a-run"}, timeout=10)
    assert history.status_code == 200, history.text
    assert [e["type"] for e in history.json()["events"]] == ["tool.invoked", "tool.completed"]
    bad = httpx.get(f"{second}/events/history", params={"limit": "100000"}, timeout=10)
    assert bad.status_code == 422 and bad.json()["field"] == "limit" and "100000" in bad.json()["message"]

    # on the other replica: heard through the database
    heard = first_streamed_event(f"{second}/events", "sse-run", lambda: _invoke(first, "sse-run"))
    assert heard["run_id"] == "sse-run" and heard["tool_id"] == "tool_calculator"
    assert os.environ.get("ECHO_TOOLS_DATABASE_URL") is None  # the children had it, this process not

    # the shipped calculator stays read-only over HTTP with the catalogue in PostgreSQL
    shipped = httpx.get(f"{first}/tool_calculator", timeout=10).json()
    replaced = httpx.post(f"{second}/register", json={**shipped, "description": "mine now"}, timeout=10)
    assert replaced.status_code in (403, 409), replaced.text
    assert "tool_calculator" in replaced.text
    deleted = httpx.delete(f"{first}/tool_calculator", timeout=10)
    assert deleted.status_code in (403, 409), deleted.text
    for url in (first, second):
        kept = httpx.get(f"{url}/tool_calculator", timeout=10).json()
        assert kept["description"] == shipped["description"]
