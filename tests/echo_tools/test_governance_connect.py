"""A user's own OAuth 2.1 connection over HTTP (`POST /tools/credentials/{name}/connect` and
`.../connect/finish`) against a real OAuth-speaking MCP server on 127.0.0.1 (metadata, dynamic
registration, PKCE, code exchange): the token is stored as that user's credential, works on the server,
and is nobody else's; a principal that may not act for users is refused; a state finishes once."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from echo_tools import ApiSettings, EgressPolicy, ToolExecutor, ToolRegistry, create_app
from echo_tools.credentials import SECRET_KEY_ENV
from echo_tools.gate import hash_key, load_principals
from tests.echo_tools._mcp_auth_support import AuthServer, auth_server

server = auth_server("oauth")
OPERATOR = {"X-API-Key": "operator-key-0123456789"}
NO_USERS = {"X-API-Key": "plain-key-0123456789"}


def app_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, ToolRegistry]:
    monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    principals = tmp_path / "principals.json"
    entry = {"name": "plain", "key_sha256": hash_key("plain-key-0123456789"), "actions": ["credentials"]}
    principals.write_text(json.dumps({"principals": [entry]}))
    registry = ToolRegistry(tmp_path / "home", egress=EgressPolicy.local())
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    settings = ApiSettings(api_key="operator-key-0123456789", principals=load_principals(principals))
    return TestClient(create_app(registry, executor, settings), base_url="http://127.0.0.1"), registry


def call_as_users(registry: ToolRegistry, users: tuple[str, ...]) -> list[str]:
    """The Authorization headers a loopback service received from calls of one `api` tool for `users`."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from echo_tools import ToolContext

    seen: list[str] = []

    class Keep(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization"):
                seen.append(self.headers["Authorization"])
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    service = ThreadingHTTPServer(("127.0.0.1", 0), Keep)
    threading.Thread(target=service.serve_forever, daemon=True).start()
    registry.register(
        {"name": "whoami", "tool_type": "api", "execution_config": {
            "url": f"http://127.0.0.1:{service.server_port}/me", "method": "GET", "credential": "crm"}}
    )  # fmt: skip
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        results = [executor.invoke_sync("whoami", {}, ToolContext(user_id=u)) for u in users]
    finally:
        executor.close()
        service.shutdown()
    assert [r.success for r in results] == [True, False]
    return seen


def authorize(url: str) -> tuple[str, str]:
    """What the user's browser does: open the authorization URL; the server (approving at once) redirects
    to the redirect URI with the code and the state."""
    answer = httpx.get(url, follow_redirects=False, timeout=30)
    assert answer.status_code in (302, 303, 307), answer.text
    query = parse_qs(urlsplit(answer.headers["location"]).query)
    return query["code"][0], query["state"][0]


def test_a_user_connects_and_their_token_is_their_own_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer
) -> None:
    client, registry = app_client(tmp_path, monkeypatch)
    body = {"user_id": "ann", "server_url": server.url, "redirect_uri": "http://127.0.0.1:9/callback"}
    started = client.post("/tools/credentials/crm/connect", json=body, headers=OPERATOR)
    assert started.status_code == 200, started.text
    url = started.json()["authorization_url"]
    assert url.startswith(server.base) and "code_challenge_method=S256" in url
    code, state = authorize(url)
    assert state == started.json()["state"]
    grants = server.stats()["code_grants"]

    done = client.post(
        "/tools/credentials/crm/connect/finish", json={"state": state, "code": code}, headers=OPERATOR
    )
    assert done.status_code == 200, done.text
    assert done.json()["user_id"] == "ann" and "token" not in done.json()
    assert server.stats()["code_grants"] == grants + 1
    assert registry.credentials.list() == [{"name": "crm", "type": "oauth_user", "user_id": "ann"}]

    seen = call_as_users(
        registry, ("ann", "ben")
    )  # an api tool naming "crm", on a service that keeps headers
    assert seen[0].startswith("Bearer ") and len(seen) == 1  # ann's call carried her token; ben's found none
    assert httpx.post(server.url, json={}, timeout=30).status_code == 401
    assert httpx.post(server.url, json={}, headers={"Authorization": seen[0]}, timeout=30).status_code != 401

    again = client.post(
        "/tools/credentials/crm/connect/finish", json={"state": state, "code": code}, headers=OPERATOR
    )
    assert again.status_code == 404 and again.json()["field"] == "state"
    assert server.stats()["code_grants"] == grants + 1


def test_a_principal_that_may_not_act_for_users_cannot_connect_for_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer
) -> None:
    client, _ = app_client(tmp_path, monkeypatch)
    body = {"user_id": "ann", "server_url": server.url, "redirect_uri": "http://127.0.0.1:9/callback"}
    refused = client.post("/tools/credentials/crm/connect", json=body, headers=NO_USERS)
    assert refused.status_code == 403 and refused.json()["field"] == "user_id"
    assert "act_for_users" in refused.json()["message"]
    bad = client.post(
        "/tools/credentials/crm/connect", json={**body, "redirect_uri": "ftp://x"}, headers=OPERATOR
    )
    assert bad.status_code == 422 and bad.json()["field"] == "redirect_uri"


def test_the_cli_connects_a_user_and_stores_the_token_as_their_own(
    tmp_path: Path, server: AuthServer
) -> None:
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "ECHO_TOOLS_HOME": str(tmp_path / "home"),
        SECRET_KEY_ENV: Fernet.generate_key().decode(),
    }
    command = [sys.executable, "-m", "echo_tools.cli", "credentials", "connect", "crm", "--user", "ann",
               "--server", server.url, "--redirect-uri", "http://127.0.0.1:9/callback"]  # fmt: skip
    with subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        assert process.stdout is not None and process.stdin is not None
        lines = [process.stdout.readline(), process.stdout.readline()]
        assert "as user 'ann'" in lines[0], lines
        code, state = authorize(lines[1].strip())
        out, err = process.communicate(
            f"http://127.0.0.1:9/callback?code={code}&state={state}\n", timeout=120
        )
    assert process.returncode == 0, err[-2000:]
    assert "Credential 'crm' of user 'ann' (oauth_user) created" in out and "refresh" not in out
    listed = subprocess.run(
        [sys.executable, "-m", "echo_tools.cli", "credentials", "list"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert listed.stdout.splitlines() == ["crm\toauth_user\tuser ann"]


def test_the_cli_connect_without_a_user_is_a_usage_error(tmp_path: Path, server: AuthServer) -> None:
    from tests.echo_tools._cli_support import cli

    done = cli(
        tmp_path / "home",
        "credentials",
        "connect",
        "crm",
        "--server",
        server.url,
        "--redirect-uri",
        "http://x/cb",
    )
    assert done.returncode == 2 and "--user" in done.stderr
