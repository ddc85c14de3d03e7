"""A real `echo-tools serve` process on 127.0.0.1 for the tests that need the whole server: shipped tools
discovered, uvicorn, the HTTP API, in its own process (so what one request does to it is visible)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.echo_tools._api_support import free_port
from tests.echo_tools._mcp_support import stop_process

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def echo_tools_serve(storage: Path, *extra: str, ready_timeout: float = 60.0) -> Iterator[tuple[str, int]]:
    """Start `echo-tools --storage STORAGE serve --port N`; yields `(base_url, pid)` once it answers."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ECHO_TOOLS_HOME": str(storage)}
    env.pop("ECHO_TOOLS_API_KEY", None)
    command = [
        sys.executable,
        "-m",
        "echo_tools.cli",
        "--storage",
        str(storage),
        "serve",
        "--port",
        str(port),
    ]
    process = subprocess.Popen([*command, *extra], cwd=storage, env=env, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_timeout
        while True:  # bounded wait for readiness
            if process.poll() is not None:
                raise RuntimeError(f"echo-tools serve exited: {process.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{url}/tools/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"echo-tools serve did not answer on {url} within {ready_timeout} s")
            time.sleep(0.1)
        yield url, process.pid
    finally:
        stop_process(process)


def rss_kb(pid: int) -> int:
    """The current resident set size of a process, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for process {pid}")


def peak_rss_kb(pid: int) -> int:
    """The peak resident set size of a process so far (VmHWM), from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for process {pid}")
