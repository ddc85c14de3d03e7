"""Exactly once across replicas: two real `echo-tools serve` processes on one PostgreSQL database; 50 calls
wait for approval, each approval is sent to both replicas at the same moment, and every approved call ran
once (counted by the tool's own side effect: one line per run)."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from echo_tools import ToolRegistry
from echo_tools.pg import PgToolStorage
from tests.echo_tools._pg_support import PgServer, free_port, replicas_up, spawn

from .test_governance_approvals import LINE_SCHEMA, SIDE

FIXTURES = "tests.echo_tools.fixture_tools"
CALLS = 50


@pytest.mark.slow  # two server processes
def test_fifty_approvals_decided_at_once_on_two_replicas_run_each_call_once(
    pg_server: PgServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = pg_server.new_database()
    storage = PgToolStorage(dsn, listen=False)
    ToolRegistry(storage=storage, allowed_modules=[FIXTURES]).register(
        {
            "name": "Write",
            "tool_type": "local",
            "input_schema": LINE_SCHEMA,
            "execution_config": {"module": SIDE, "function": "append_line"},
            "approval": "always",
        }
    )
    storage.close()
    monkeypatch.setenv("ECHO_TOOLS_ALLOWED_MODULES", FIXTURES)
    ports = [free_port(), free_port()]
    children = [spawn("serve", dsn, str(port)) for port in ports]
    urls = [f"http://127.0.0.1:{port}/tools" for port in ports]
    out = tmp_path / "side_effect.txt"
    with replicas_up(children, urls), httpx.Client(timeout=60) as client:
        ids = []
        for i in range(CALLS):
            asked = client.post(f"{urls[i % 2]}/invoke/Write", json={"path": str(out), "line": f"call-{i}"})
            assert asked.status_code == 202, asked.text
            ids.append(asked.json()["result"]["metadata"]["approval_id"])
        pending = client.get(f"{urls[1]}/approvals", params={"limit": 1000}).json()["approvals"]
        assert sorted(a["approval_id"] for a in pending) == sorted(ids)  # each replica sees every approval
        assert not out.exists()

        statuses: dict[str, list[int]] = {approval_id: [] for approval_id in ids}
        start = threading.Barrier(2 * CALLS)

        def decide(url: str, approval_id: str) -> None:
            start.wait()
            answer = httpx.post(f"{url}/approvals/{approval_id}", json={"decision": "approve"}, timeout=60)
            statuses[approval_id].append(answer.status_code)

        threads = [threading.Thread(target=decide, args=(url, i)) for i in ids for url in urls]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(sorted(codes) == [200, 409] for codes in statuses.values()), statuses
        ran = out.read_text().splitlines()
        assert sorted(ran) == sorted(f"call-{i}" for i in range(CALLS))  # each approved call ran exactly once
        records = [client.get(f"{urls[0]}/approvals/{i}").json() for i in ids]
        assert {r["status"] for r in records} == {"done"}
