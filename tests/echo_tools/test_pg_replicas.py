"""Three real API server processes on one real PostgreSQL database, wired as docs/deploy.md shows.

Register on one and read on the others; invoke on two and find one history; SSE on one sees another's
calls; kill one during writes and lose nothing it acknowledged.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.pg import PgRunHistory, PgToolStorage
from tests.echo_tools._pg_support import (
    PgServer,
    first_streamed_event,
    free_port,
    replicas_up,
    spawn,
    wait_until,
)

MANIFEST = Path(__file__).resolve().parents[2] / "AgentTools" / "calculator" / "tool_manifest.json"


@pytest.fixture(scope="module")
def replicas(pg_server: PgServer) -> Iterator[tuple[str, list[str]]]:
    """Three replicas on one database, for the module: a replica start is about 1 s of CPU, and the tests
    only add tools under their own ids (the one that kills a replica starts its own)."""
    dsn = pg_server.new_database()
    with _started(dsn, 3) as (urls, _):
        yield dsn, urls


@contextmanager
def _started(dsn: str, count: int) -> Iterator[tuple[list[str], list[subprocess.Popen[str]]]]:
    """`count` `serve` processes on `dsn`, healthy; stopped on exit (those still running)."""
    ports = [free_port() for _ in range(count)]
    children = [spawn("serve", dsn, str(port)) for port in ports]
    urls = [f"http://127.0.0.1:{port}/tools" for port in ports]
    with replicas_up(children, urls):
        yield urls, children


def _calculator(tool_id: str, name: str) -> dict[str, Any]:
    data = json.loads(MANIFEST.read_text())
    return {**data, "tool_id": tool_id, "name": name}


def _invoke(url: str, run_id: str) -> dict[str, Any]:
    answer = httpx.post(
        f"{url}/invoke/id/calc_copy",
        params={"run_id": run_id},
        json={"operation": "add", "values": [2, 3]},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_replicas_share_the_catalogue_the_history_and_the_event_stream(
    replicas: tuple[str, list[str]],
) -> None:
    dsn, urls = replicas
    created = httpx.post(f"{urls[0]}/register", json=_calculator("calc_copy", "Calc Copy"), timeout=30)
    assert created.status_code == 200 and created.json()["status"] == "registered", created.text
    for url in urls[1:]:
        wait_until(
            lambda u=url: httpx.get(f"{u}/calc_copy", timeout=5).status_code == 200, 10, f"{url} never saw it"
        )

    clash = httpx.post(f"{urls[2]}/register", json=_calculator("calc_other", "calc-copy"), timeout=30)
    assert clash.status_code in (400, 409, 422) and "calc_copy" in clash.text

    # a call on one replica is streamed by another
    heard = first_streamed_event(f"{urls[2]}/events", "sse-run", lambda: _invoke(urls[0], "sse-run"))
    assert heard["run_id"] == "sse-run" and heard["tool_id"] == "calc_copy"

    for url in urls[1:]:
        assert _invoke(url, "shared-run")["success"] is True
    history = PgRunHistory(dsn)
    try:
        kinds = [e.type for e in history.events(run_id="shared-run")]
    finally:
        history.close()
    assert kinds.count("tool.invoked") == 2 and kinds.count("tool.completed") == 2


def test_a_replica_killed_during_writes_loses_nothing_it_acknowledged(
    replicas: tuple[str, list[str]],
) -> None:
    dsn, urls = replicas
    acknowledged: list[str] = []
    with _started(dsn, 1) as ([victim], [child]):  # a fourth replica on the database, killed while it writes
        for i in range(200):
            if i == 10:
                child.kill()  # mid-stream: the next requests to it fail, the acknowledged stay
            try:
                answer = httpx.post(
                    f"{victim}/register", json=_calculator(f"calc_{i}", f"Calc {i}"), timeout=10
                )
            except httpx.TransportError:
                break
            assert answer.status_code == 200, answer.text
            acknowledged.append(f"calc_{i}")
    assert len(acknowledged) >= 10
    storage = PgToolStorage(dsn, listen=False)
    try:
        stored = {t.tool_id for t in storage.load_all()[0]}
    finally:
        storage.close()
    assert set(acknowledged) <= stored
    for tool_id in acknowledged:
        assert httpx.get(f"{urls[0]}/{tool_id}", timeout=10).status_code == 200
