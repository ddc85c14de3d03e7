"""Shared helpers of the MCP tests: real server processes (stdio configs, an HTTP server on 127.0.0.1),
forked from one fork server per test process that imported the MCP SDK once; a registry and executor that
allow loopback, and bounded waits on registry events.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from echo_tools import EgressPolicy, ToolDef, ToolExecutor, ToolRegistry
from echo_tools.events import ToolEvent
from tests import _forkserver

if TYPE_CHECKING:
    from mcp import types

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
CALC = SERVERS / "calc_server.py"
PAGED = SERVERS / "paged_server.py"
START_TIMEOUT_S = 30.0

# the protocol's reference server, installed from the npm registry into a cache folder outside the checkout
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything@2026.8.31"
NPM_CACHE = Path(
    os.environ.get("ECHO_TOOLS_TEST_NPM_CACHE", Path.home() / ".cache" / "echo-tools-tests" / "npm")
)
EVERYTHING_BIN = NPM_CACHE / "node_modules" / ".bin" / "mcp-server-everything"


def installed() -> Path:
    """The executable of server-everything, installed once (npm registry only) into `NPM_CACHE`; one
    process installs while the others (pytest-xdist workers, other runs) wait on the folder's lock."""
    import fcntl

    NPM_CACHE.mkdir(parents=True, exist_ok=True)
    with open(NPM_CACHE / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not EVERYTHING_BIN.exists():
            import pytest

            npm = shutil.which("npm")
            if npm is None:
                pytest.skip("Node.js (npm) is not installed on this machine")
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(NPM_CACHE), EVERYTHING_PACKAGE],
                check=True,
                capture_output=True,
                timeout=300,
            )
    return EVERYTHING_BIN


def everything_config(**extra: Any) -> dict[str, Any]:
    """An `mcpServers` entry running server-everything over stdio."""
    return {"command": str(installed()), "args": ["stdio"], **extra}


def stdio_config(script: Path = CALC, **extra: Any) -> dict[str, Any]:
    """An `mcpServers` entry running `script` over stdio with this interpreter, whose server process is
    forked from the session's fork server (`tests/_forkserver.py`: the SDK is imported once, not per
    start); ECHO_TEST_MCP_FORK=0 runs the script directly."""
    if os.environ.get("ECHO_TEST_MCP_FORK") == "0":
        return {"command": sys.executable, "args": [str(script)], **extra}
    python, *args = _forkserver.command(fork_server())
    return {"command": python, "args": [*args, str(script)], **extra}


def script_of(config: dict[str, Any]) -> Path:
    """The server script a `stdio_config` entry runs."""
    return Path(config["args"][-1])


# what every test server imports: paid once by the fork server instead of once per start
PRELOADED = ["anyio", "mcp.server.fastmcp", "mcp.server.lowlevel", "mcp.server.stdio", "mcp.types", "uvicorn"]
_FORK_SERVER: list[str] = []
_FORK_LOCK = threading.Lock()


def fork_server() -> str:
    """The socket path of this test process's fork server, started at the first call and stopped when
    the process exits. It runs without PYTHON* variables, as the SDK starts a stdio server (in its
    default environment): a fork server serves only requests with the start-up settings it has."""
    with _FORK_LOCK:
        if not _FORK_SERVER:
            import atexit
            import tempfile

            path = os.path.join(tempfile.mkdtemp(prefix="echo-mcp-fork-"), "fork.sock")
            atexit.register(_forkserver.stop, _forkserver.start(path, PRELOADED, env=_without_startup()))
            _FORK_SERVER.append(path)
        return _FORK_SERVER[0]


def _without_startup(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (this process's by default) without the interpreter's start-up settings (PYTHON*)."""
    return {k: v for k, v in (os.environ if env is None else env).items() if not k.startswith("PYTHON")}


@cache
def tool_listing(script: Path) -> list[types.Tool]:
    """The tool list of the server `script` (over stdio), fetched once for the session: a discovery starts
    the server (about 0.6 s of CPU to import `mcp`)."""
    from echo_tools.mcp.config import check_server_config
    from echo_tools.mcp.sessions import discover_tools
    from echo_tools.runtime import run_sync

    return run_sync(
        discover_tools(
            script.stem, check_server_config(script.stem, stdio_config(script)), EgressPolicy.local()
        )
    )


def add_listed_server(registry: ToolRegistry, name: str, config: dict[str, Any]) -> list[ToolDef]:
    """`registry.add_mcp_server(name, config)` for a stdio `config` of one of our servers, with the tools of
    its cached listing instead of a discovery, for tests whose point is the calls, not the discovery (the
    stdio, HTTP and config tests discover for real). The server's tool list must not depend on the
    config."""
    from echo_tools.mcp.config import register_server

    return register_server(registry, name, config, tool_listing(script_of(config)))


def server_object(script: Path = CALC) -> Any:
    """The SDK server object (`mcp`, a FastMCP) of a test server script, imported into this process, for
    `echo_tools.mcp.memory.serve_in_memory`: a protocol peer without a process."""
    import importlib

    if str(SERVERS) not in sys.path:
        sys.path.insert(0, str(SERVERS))  # the scripts import their neighbour `_serving`
    return importlib.import_module(script.stem).mcp


def make_registry(tmp_path: Path | None = None) -> ToolRegistry:
    """A registry (stored under `tmp_path` when given) whose egress policy allows loopback."""
    storage = tmp_path / "tools" if tmp_path is not None else None
    return ToolRegistry(storage, egress=EgressPolicy.local())


def make_executor(registry: ToolRegistry) -> ToolExecutor:
    return ToolExecutor(registry, egress=EgressPolicy.local())


class HttpServer:
    """`SCRIPT --http` (streamable HTTP; the calc server serves SSE too) in a subprocess; `start()` returns
    once the port listens (bounded)."""

    def __init__(self, script: Path = CALC) -> None:
        self.script = script
        self.port = 0
        self.process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    @property
    def sse_url(self) -> str:
        """The SSE transport's endpoint (calc server only)."""
        return f"http://127.0.0.1:{self.port}/sse"

    def start(self) -> HttpServer:
        command = [sys.executable, str(self.script), "--http", str(self.port)]
        self.process, self.port = start_reporting_port(command, self.script.name)
        return self

    def restart(self) -> HttpServer:
        """Stop (if running) and start again on the same port."""
        self.stop()
        return self.start()

    def stop(self) -> None:
        process, self.process = self.process, None
        stop_process(process)


def start_reporting_port(
    command: list[str], name: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], int]:
    """Start a test server that prints `PORT <n>` on its first line once it listens; (process, port). A
    Python server script is forked from the fork server like the stdio servers (`stdio_config`).

    Raises:
        RuntimeError: it printed something else, or nothing within START_TIMEOUT_S (it is stopped).
    """
    if os.environ.get("ECHO_TEST_MCP_FORK") != "0" and command[:1] == [sys.executable]:
        command = [*_forkserver.command(fork_server()), *command[1:]]  # forked: see `stdio_config`
        env = _without_startup(env)  # the fork server's start-up settings: see `fork_server`
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    line = first_line(process, name)
    if not line.startswith("PORT "):
        stop_process(process)
        raise RuntimeError(f"{name} did not report its port; it printed {line!r}")
    return process, int(line.split()[1])


def first_line(process: subprocess.Popen[str], name: str) -> str:
    """The first line `process` prints on its stdout pipe, waiting at most START_TIMEOUT_S.

    Raises:
        RuntimeError: nothing within START_TIMEOUT_S (the process is stopped).
    """
    lines: queue.Queue[str] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None
    threading.Thread(target=lambda: lines.put(stdout.readline()), daemon=True).start()
    try:
        return lines.get(timeout=START_TIMEOUT_S)
    except queue.Empty as exc:
        stop_process(process)
        raise RuntimeError(f"{name} did not start within {START_TIMEOUT_S} s") from exc


def stop_process(process: subprocess.Popen[Any] | None) -> None:
    """SIGTERM, then SIGKILL after 10 s; closes its output pipes."""
    if process is None:
        return
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            pipe.close()


class EventWaiter:
    """A registry event sink that lets a test wait (bounded) for `tool.registered` of given tool ids."""

    def __init__(self) -> None:
        self.seen: list[ToolEvent] = []
        self._changed = threading.Condition()

    def __call__(self, event: ToolEvent) -> None:
        with self._changed:
            self.seen.append(event)
            self._changed.notify_all()

    def wait_for(self, *tool_ids: str, timeout: float = 20.0) -> bool:
        """True once a `tool.registered` event arrived for every id in `tool_ids`."""
        with self._changed:
            return self._changed.wait_for(
                lambda: set(tool_ids) <= {e.tool_id for e in self.seen if e.type == "tool.registered"},
                timeout,
            )


def process_alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False
