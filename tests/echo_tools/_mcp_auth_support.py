"""The authenticating MCP server of the mcp_auth tests (`mcp_servers/auth_server.py`) in a subprocess on
127.0.0.1, with the secrets it accepts."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from typing import Any

import pytest

from tests.echo_tools._mcp_support import SERVERS, server_python, start_reporting_port, stop_process

AUTH_SERVER = SERVERS / "auth_server.py"
SECRETS = {
    "AUTH_BEARER": "mcp-bearer-7f3a91c2e5",
    "AUTH_API_KEY": "mcp-apikey-b81d44e09a",
    "AUTH_USER": "mcp-user",
    "AUTH_PASSWORD": "mcp-password-5c2e8f10d7",
    "AUTH_CLIENT_ID": "mcp-client",
    "AUTH_CLIENT_SECRET": "mcp-client-secret-93ab17e4c6",
}
SECRET_VALUES = [v for k, v in SECRETS.items() if k not in ("AUTH_USER", "AUTH_CLIENT_ID")]


class AuthServer:
    """`auth_server.py MODE` in a subprocess; `start()` returns once the port listens (bounded)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def start(self) -> AuthServer:
        command = [server_python(1), str(AUTH_SERVER), self.mode]  # a server of the SDK 1.x
        self.process, self.port = start_reporting_port(command, AUTH_SERVER.name, {**os.environ, **SECRETS})
        return self

    def stats(self) -> dict[str, int]:
        with urllib.request.urlopen(f"{self.base}/stats", timeout=10) as response:
            data: dict[str, int] = json.loads(response.read())
        return data

    def post(self, path: str) -> Any:
        request = urllib.request.Request(f"{self.base}{path}", data=b"", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        process, self.process = self.process, None
        stop_process(process)


class AuthServers:
    """One running `auth_server.py` per mode, started at first use and stopped together (the session's
    `auth_servers` fixture): the tests read the servers' counters as differences, never as totals."""

    def __init__(self) -> None:
        self._running: dict[str, AuthServer] = {}

    def get(self, mode: str) -> AuthServer:
        if mode not in self._running:
            self._running[mode] = AuthServer(mode).start()
        return self._running[mode]

    def stop(self) -> None:
        for running in self._running.values():
            running.stop()
        self._running.clear()


def auth_server(mode: str) -> Any:
    """A fixture: the session's `auth_server.py MODE` (conftest `auth_servers`)."""

    @pytest.fixture
    def server(auth_servers: AuthServers) -> AuthServer:
        return auth_servers.get(mode)

    return server
