"""Shared helpers of the MCP tests: real server processes (stdio configs, an HTTP server on 127.0.0.1),
forked from one fork server per test process and SDK generation that imported the MCP SDK once; a registry
and executor that allow loopback, and bounded waits on registry events.

The test servers are written for one SDK generation each: `*_v2.py` for `mcp` 2.x, the others for 1.x. A
server runs with an interpreter that has its generation (`server_python`): this one when the installed
SDK matches, else a small virtualenv of that SDK alone, made once from `requirements/mcp<N>-servers.txt`
into the tests' cache folder (local wheels; about 10 s), so the suite on either generation starts the
servers of both.
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
from echo_tools.compat.mcp import GENERATION
from echo_tools.events import ToolEvent
from tests import _forkserver

if TYPE_CHECKING:
    from mcp import types

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
ROOT = Path(__file__).resolve().parents[2]
CALC = SERVERS / "calc_server.py"
CALC_V2 = SERVERS / "calc_v2.py"
CACHE = Path(os.environ.get("ECHO_TOOLS_TEST_CACHE", Path.home() / ".cache" / "echo-tools-tests"))
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


def generation_of(script: Path) -> int:
    """The SDK generation a test server script is written for (`*_v2.py`: 2, else 1)."""
    return 2 if script.stem.endswith("_v2") else 1


def server_python(generation: int) -> str:
    """An interpreter with the MCP SDK of `generation`: this one when the installed SDK is of it, else
    `ECHO_TEST_MCP<N>_PYTHON`, else a virtualenv of `requirements/mcp<N>-servers.txt` made once in the
    cache folder (one process makes it while the others wait on its lock)."""
    python = _server_python(generation)
    _PYTHONS[python] = generation
    return python


_PYTHONS: dict[str, int] = {sys.executable: GENERATION}  # interpreter -> the SDK generation it has


def _server_python(generation: int) -> str:
    if generation == GENERATION:
        return sys.executable
    given = os.environ.get(f"ECHO_TEST_MCP{generation}_PYTHON")
    if given:
        return given
    import fcntl
    import hashlib

    requirements = ROOT / "requirements" / f"mcp{generation}-servers.txt"
    digest = hashlib.sha256(requirements.read_bytes()).hexdigest()[:10]
    folder = CACHE / f"mcp{generation}-servers-{digest}"
    python = folder / "bin" / "python"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".mcp{generation}-servers.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (folder / ".installed").exists():
            shutil.rmtree(folder, ignore_errors=True)
            base = getattr(sys, "_base_executable", sys.executable)
            subprocess.run([base, "-m", "venv", str(folder)], check=True, capture_output=True, timeout=300)
            subprocess.run(
                [str(python), "-m", "pip", "install", "-q", "-r", str(requirements)],
                check=True,
                capture_output=True,
                timeout=600,
            )
            (folder / ".installed").write_text("ok\n")
    return str(python)


def stdio_config(script: Path = CALC, **extra: Any) -> dict[str, Any]:
    """An `mcpServers` entry running `script` over stdio with an interpreter of its SDK generation, whose
    server process is forked from that generation's fork server (`tests/_forkserver.py`: the SDK is
    imported once, not per start); ECHO_TEST_MCP_FORK=0 runs the script directly."""
    generation = generation_of(script)
    if os.environ.get("ECHO_TEST_MCP_FORK") == "0":
        return {"command": server_python(generation), "args": [str(script)], **extra}
    python, *args = _forkserver.command(fork_server(generation), server_python(generation))
    return {"command": python, "args": [*args, str(script)], **extra}


def script_of(config: dict[str, Any]) -> Path:
    """The server script a `stdio_config` entry runs."""
    return Path(config["args"][-1])


# what every test server of a generation imports: paid once by the fork server instead of once per start
PRELOADED = {
    1: ["anyio", "mcp.server.fastmcp", "mcp.server.lowlevel", "mcp.server.stdio", "mcp.types", "uvicorn"],
    2: ["anyio", "mcp.server.mcpserver", "mcp.server.lowlevel", "mcp.server.stdio", "mcp.types", "uvicorn"],
}
_FORK_SERVER: dict[int, str] = {}
_FORK_LOCK = threading.Lock()


def fork_server(generation: int = 1) -> str:
    """The socket path of this test process's fork server for servers of SDK `generation`, started at the
    first call and stopped when the process exits. It runs without PYTHON* variables, as the SDK starts a
    stdio server (in its default environment): a fork server serves only requests with the start-up
    settings it has."""
    python = server_python(generation)
    with _FORK_LOCK:
        if generation not in _FORK_SERVER:
            import atexit
            import tempfile

            path = os.path.join(tempfile.mkdtemp(prefix="echo-mcp-fork-"), "fork.sock")
            server = _forkserver.start(path, PRELOADED[generation], python, env=_without_startup())
            atexit.register(_forkserver.stop, server)
            _FORK_SERVER[generation] = path
        return _FORK_SERVER[generation]


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
    """The SDK server object (`mcp`: a FastMCP, or under 2.x an MCPServer) of a test server script,
    imported into this process, for `echo_tools.mcp.memory.serve_in_memory`: a protocol peer without a
    process. Under the SDK 2.x the calc server is its 2.x twin (`calc_v2.py`)."""
    import importlib

    if GENERATION >= 2 and script == CALC:
        script = CALC_V2
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

    def start(self, *extra: str) -> HttpServer:
        """Start it (`extra`: more arguments, `--stateless`); with an interpreter of its SDK generation."""
        python = server_python(generation_of(self.script))
        command = [python, str(self.script), "--http", str(self.port), *extra]
        self.process, self.port = start_reporting_port(command, self.script.name)
        self._extra = extra
        return self

    def restart(self) -> HttpServer:
        """Stop (if running) and start again on the same port."""
        self.stop()
        return self.start(*getattr(self, "_extra", ()))

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
    generation = _PYTHONS.get(command[0])
    if os.environ.get("ECHO_TEST_MCP_FORK") != "0" and generation is not None:
        command = [
            *_forkserver.command(fork_server(generation), command[0]),
            *command[1:],
        ]  # see `stdio_config`
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
