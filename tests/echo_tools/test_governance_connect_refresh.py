"""A user's OAuth 2.1 connection keeps its refresh token (a secret, never shown) and renews the access
token once it expires, against the real OAuth-speaking MCP server on 127.0.0.1 (which rotates refresh
tokens): each user's call renews that user's own token only, and carries it to a loopback service; one
renewal at a time per user, however many calls find the token expired."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from echo_tools import EgressPolicy, ToolContext, ToolExecutor, ToolRegistry
from echo_tools.credentials import renewal
from tests.echo_tools._mcp_auth_support import AuthServer, auth_server

from .test_governance_connect import OPERATOR, app_client, authorize

server = auth_server("oauth")
SHIFT_S = 2 * 3600.0  # past the server's one-hour access tokens


class Service:
    """A loopback HTTP service that keeps the Authorization header of every request, in order."""

    def __init__(self) -> None:
        seen: list[str] = []

        class Keep(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.headers.get("Authorization") or "")
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args: object) -> None:
                pass

        self.seen = seen
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Keep)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_port}/me"


@pytest.fixture
def service() -> Iterator[Service]:
    running = Service()
    yield running
    running.http.shutdown()


def connect_users(client: TestClient, server: AuthServer, *users: str) -> None:
    for user in users:
        body = {"user_id": user, "server_url": server.url, "redirect_uri": "http://127.0.0.1:9/callback"}
        started = client.post("/tools/credentials/crm/connect", json=body, headers=OPERATOR)
        assert started.status_code == 200, started.text
        code, state = authorize(started.json()["authorization_url"])
        done = client.post(
            "/tools/credentials/crm/connect/finish", json={"state": state, "code": code}, headers=OPERATOR
        )
        assert done.status_code == 200, done.text
        assert "refresh" not in done.text and "token" not in done.json()


def caller(registry: ToolRegistry, service: Service) -> ToolExecutor:
    registry.register(
        {
            "name": "whoami",
            "tool_type": "api",
            "execution_config": {"url": service.url, "method": "GET", "credential": "crm"},
        }
    )
    return ToolExecutor(registry, egress=EgressPolicy.local())


def call(executor: ToolExecutor, user: str | None) -> bool:
    return executor.invoke_sync("whoami", {}, ToolContext(user_id=user)).success


def accepted(server: AuthServer, header: str) -> bool:
    """Whether the OAuth server takes the bearer token (401 without a valid one)."""
    return httpx.post(server.url, json={}, headers={"Authorization": header}, timeout=30).status_code != 401


def test_each_users_expired_token_is_renewed_with_their_own_refresh_token_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer, service: Service
) -> None:
    client, registry = app_client(tmp_path, monkeypatch)
    connect_users(client, server, "ann", "ben")
    listed = registry.credentials.list()
    assert listed == [{"name": "crm", "type": "oauth_user", "user_id": u} for u in ("ann", "ben")]
    shown = client.get("/tools/credentials", headers=OPERATOR)
    assert shown.status_code == 200 and "oauth_user" in shown.text and "refresh_token" not in shown.text
    executor = caller(registry, service)
    refreshes = server.stats()["refresh_grants"]
    assert call(executor, "ann") and call(executor, "ben")
    ann_first, ben_first = service.seen
    assert ann_first != ben_first and server.stats()["refresh_grants"] == refreshes  # fresh: nothing renewed

    later = renewal.clock() + SHIFT_S
    monkeypatch.setattr(renewal, "clock", lambda: later)  # both access tokens have expired now
    assert call(executor, "ann")
    ann_renewed = service.seen[-1]
    assert ann_renewed not in (ann_first, ben_first) and accepted(server, ann_renewed)
    assert server.stats()["refresh_grants"] == refreshes + 1
    ben_stored = registry.credentials.load_mcp_oauth("crm@ben")
    assert (
        ben_stored is not None and f"Bearer {ben_stored['token']}" == ben_first
    )  # ann's renewal left ben's alone

    assert call(executor, "ben")
    ben_renewed = service.seen[-1]
    assert ben_renewed not in (ben_first, ann_first, ann_renewed) and accepted(server, ben_renewed)
    assert call(executor, "ann") and service.seen[-1] == ann_renewed  # renewed once, then used
    assert server.stats()["refresh_grants"] == refreshes + 2
    assert not call(executor, "cyd") and not call(executor, None)  # no connection: no token, nobody else's
    assert len(service.seen) == 5
    executor.close()


def test_calls_that_find_the_token_expired_at_once_renew_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer, service: Service
) -> None:
    client, registry = app_client(tmp_path, monkeypatch)
    connect_users(client, server, "ann")
    executor = caller(registry, service)
    refreshes = server.stats()["refresh_grants"]
    later = renewal.clock() + SHIFT_S
    monkeypatch.setattr(renewal, "clock", lambda: later)

    async def together() -> list[bool]:
        context = ToolContext(user_id="ann")
        results = await asyncio.gather(*(executor.invoke("whoami", {}, context) for _ in range(4)))
        return [r.success for r in results]

    assert asyncio.run(together()) == [True] * 4
    assert server.stats()["refresh_grants"] == refreshes + 1  # the rotated refresh token was used once
    assert len(set(service.seen)) == 1 and accepted(server, service.seen[0])
    executor.close()
