"""The authenticating MCP server of the mcp_auth tests (`mcp_servers/auth_server.py`) in a subprocess on
127.0.0.1, with the secrets it accepts."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import urllib.request
from typing import Any

from tests.echo_tools._mcp_support import SERVERS, START_TIMEOUT_S

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
        self.process = subprocess.Popen(
            [sys.executable, str(AUTH_SERVER), self.mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env={**os.environ, **SECRETS},
        )
        lines: queue.Queue[str] = queue.Queue()
        stdout = self.process.stdout
        assert stdout is not None
        threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
        try:
            line = lines.get(timeout=START_TIMEOUT_S)
        except queue.Empty as exc:
            self.stop()
            raise RuntimeError(f"auth_server.py did not start within {START_TIMEOUT_S} s") from exc
        if not line.startswith("PORT "):
            self.stop()
            raise RuntimeError(f"auth_server.py did not report its port; it printed {line!r}")
        self.port = int(line.split()[1])
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
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if process.stdout is not None:
            process.stdout.close()
