"""`echo-tools mcp add NAME --url URL --credential CRED`, `--oauth` (the URL printed, the browser's redirect
received on the loopback callback) and `mcp login NAME`, in process against real servers on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from echo_tools.credentials import SECRET_KEY_ENV, new_key
from tests.echo_tools._cli_support import InProcessCli, assert_one_line_error
from tests.echo_tools._mcp_auth_support import SECRET_VALUES, SECRETS, AuthServer, auth_server

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    path = tmp_path / "home"
    path.mkdir()
    return path


static = auth_server("static")  # the tests only connect and call `ping`
oauth = auth_server("oauth")  # its counters are read as differences


def test_add_with_a_credential_stores_its_name_and_calls_succeed(
    home: Path, tmp_path: Path, run_cli: InProcessCli, static: AuthServer
) -> None:
    source = tmp_path / "bearer.json"
    source.write_text(json.dumps({"type": "bearer", "token": SECRETS["AUTH_BEARER"]}))
    assert run_cli(home, "credentials", "set", "m-bearer", "--from", str(source)).returncode == 0
    added = run_cli(home, "mcp", "add", "guarded", "--url", static.url, "--credential", "m-bearer")
    assert added.returncode == 0, added.stderr
    assert "mcp_guarded_ping" in added.stdout
    called = run_cli(home, "invoke", "guarded_ping", "--input", "{}")
    assert called.returncode == 0, called.stderr
    assert "pong" in called.stdout
    [config] = home.rglob("mcp_servers.json")
    stored = json.loads(config.read_text())["mcpServers"]["guarded"]
    assert stored == {"url": static.url, "transport": "streamable_http", "credential": "m-bearer"}
    listed = run_cli(home, "mcp", "list").stdout
    assert f"guarded  {static.url}  1 tools  credential=m-bearer" in listed
    everything = added.stdout + called.stdout + listed + config.read_text()
    assert all(secret not in everything for secret in SECRET_VALUES)


def test_add_with_an_unknown_credential_fails_naming_it(
    home: Path, run_cli: InProcessCli, static: AuthServer
) -> None:
    added = run_cli(home, "mcp", "add", "guarded", "--url", static.url, "--credential", "nowhere")
    line = assert_one_line_error(added)
    assert "credential 'nowhere' does not exist" in line and "'guarded'" in line


def test_add_with_oauth_prints_the_url_and_receives_the_redirect(
    home: Path, run_cli: InProcessCli, oauth: AuthServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []

    def browser(url: str) -> bool:  # the person's browser: follows the approval to the loopback callback
        opened.append(url)
        return httpx.get(url, follow_redirects=True, timeout=30).status_code == 200

    monkeypatch.setattr("webbrowser.open", browser)
    added = run_cli(home, "mcp", "add", "secure", "--url", oauth.url, "--oauth", "--scope", "tools", "--open")
    assert added.returncode == 0, added.stderr
    assert "Open this URL in a browser" in added.stdout and opened[0] in added.stdout
    assert "mcp_secure_ping" in added.stdout
    assert run_cli(home, "invoke", "secure_ping", "--input", "{}").returncode == 0
    grants = oauth.stats()["code_grants"]
    again = run_cli(home, "mcp", "login", "secure", "--open")
    assert again.returncode == 0, again.stderr
    assert "authorized; 1 tools" in again.stdout
    assert oauth.stats()["code_grants"] == grants + 1 and len(opened) == 2


def test_login_of_a_server_without_oauth_says_how_to_add_it(
    home: Path, tmp_path: Path, run_cli: InProcessCli, static: AuthServer
) -> None:
    source = tmp_path / "key.json"
    source.write_text(
        json.dumps({"type": "api_key", "in": "header", "name": "X-Api-Key", "value": SECRETS["AUTH_API_KEY"]})
    )
    assert run_cli(home, "credentials", "set", "m-key", "--from", str(source)).returncode == 0
    assert (
        run_cli(home, "mcp", "add", "guarded", "--url", static.url, "--credential", "m-key").returncode == 0
    )
    line = assert_one_line_error(run_cli(home, "mcp", "login", "guarded"), code=2)
    assert "'guarded' is not configured for OAuth" in line and "--oauth" in line
