"""The network tools' shared client (AgentTools._http): one per event loop, closed when that loop ends."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap

import pytest

from AgentTools._http import close_shared_client, shared_client
from AgentTools.http_request.service import HttpRequestService
from AgentTools.web_search.local_server import searxng_response
from tests.agent_tools._http_support import Reply, recording_server
from tests.agent_tools._support import REPO_ROOT

HIT = {"title": "Grid batteries", "url": "https://e.org/b", "content": "Batteries store solar energy."}

# two short-lived loops each calling both network tools, then a collection: what a CLI or a sync caller does
CHILD = textwrap.dedent(
    """
    import asyncio, gc, sys
    from AgentTools.http_request.service import HttpRequestService
    from AgentTools.web_search.service import WebSearchService

    async def both(url):
        answer = await HttpRequestService().request(url + "/echo")
        found = await WebSearchService().search("grid batteries", provider="searxng")
        return answer["status_code"], len(found["results"])

    for _ in range(2):
        print(asyncio.run(both(sys.argv[1])))
    gc.collect()
    """
)


@pytest.fixture
def server():
    routes = {
        "/echo": lambda seen: Reply(body={"ok": True}),
        "/search": lambda seen: Reply(body=searxng_response([HIT], seen.params["q"], 1)),
    }
    with recording_server(routes) as running:
        yield running


def test_a_short_lived_loop_leaves_no_unclosed_client_session_on_stderr(server):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO_ROOT),
        "ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK": "1",
        "ECHO_SEARXNG_URL": server.url,
    }
    done = subprocess.run(
        [sys.executable, "-W", "default", "-c", CHILD, server.url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["(200, 1)", "(200, 1)"]
    assert "Unclosed" not in done.stderr, done.stderr
    assert [seen.path for seen in server.seen] == ["/echo", "/search", "/echo", "/search"]


def test_the_loops_client_is_closed_when_asyncio_run_ends(server, monkeypatch):
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")

    async def call():
        answer = await HttpRequestService().request(f"{server.url}/echo")
        return answer, shared_client()

    answer, client = asyncio.run(call())
    assert answer["status_code"] == 200
    assert client.is_closed


async def test_closing_early_closes_the_client_and_the_next_call_gets_a_new_one(server, monkeypatch):
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")
    first = shared_client()
    await HttpRequestService().request(f"{server.url}/echo")
    await close_shared_client()
    assert first.is_closed
    second = shared_client()
    assert second is not first and not second.is_closed
    assert (await HttpRequestService().request(f"{server.url}/echo"))["status_code"] == 200
    await close_shared_client()
    assert second.is_closed
