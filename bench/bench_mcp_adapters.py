"""echo-tools against langchain-mcp-adapters on the same real MCP servers: discovery, per call, features.

Servers (installed beforehand by `make bench`, never fetched here; the run touches only 127.0.0.1):
  - `@modelcontextprotocol/server-everything` (npm, the protocol's reference server): stdio, and streamable
    HTTP on a free loopback port; tool `echo`;
  - `mcp-server-time` (PyPI): stdio; tool `get_current_time`;
  - for the 7-server config also `server-filesystem`, `server-memory` (npm), `mcp-server-git` (PyPI) and
    this repository's `calc_server.py`.
Rows, each server and transport:
  - discovery: ours `registry.add_mcp_server` (connect, initialize, list, register) against the adapters'
    `client.get_tools(server_name=...)` (connect, initialize, list, make tools), turns alternated;
  - per call: ours `executor.invoke` (pooled session) and our LangChain tool (`to_langchain_tool`), against
    the adapters' tool on a persistent session (`load_mcp_tools(session)`), measured in alternating
    batches; then the adapters' default tool (`client.get_tools()`: a new session per call), fewer calls;
  - 7 servers of one config: ours `registry.load_mcp_config(file)` against `MultiServerMCPClient(...)
    .get_tools()`, both concurrent, turns alternated; and ours one server after another.
Then the features table (what each side does, checked in the adapters' installed source).
Medians (per call: microseconds; discovery: milliseconds). Output is markdown.

Install the servers once (registries only):
  npm install --prefix ~/.cache/echo-tools-tests/npm @modelcontextprotocol/server-everything
  npm install --prefix ~/.cache/echo-tools-tests/npm-bench @modelcontextprotocol/server-filesystem \
      @modelcontextprotocol/server-memory
  python -m venv ~/.cache/echo-tools-tests/pypi-venv
  ~/.cache/echo-tools-tests/pypi-venv/bin/pip install mcp-server-time mcp-server-git
Run: .venv/bin/python bench/bench_mcp_adapters.py   (BENCH_N=600 calls per persistent row; needs `.[bench]`)

With the MCP SDK 2.x installed (the second test environment: `make install-mcp2`, then
`.venv-mcp2/bin/python bench/bench_mcp_adapters.py`), langchain-mcp-adapters cannot be installed (it
requires mcp<2): the run compares echo-tools with the raw 2.x SDK client (`mcp.Client`) on the same
server, `tests/echo_tools/mcp_servers/interop_v2.py` (its `echo` tool), a warm call over stdio and over
streamable HTTP, both speaking 2026-07-28, in alternating batches of the same run; target <= 1.2x.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collections.abc import AsyncIterator  # noqa: E402
from contextlib import asynccontextmanager  # noqa: E402

from _common import ameasure  # noqa: E402
from bench_mcp import interleaved  # noqa: E402

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry  # noqa: E402
from echo_tools.mcp.connection import on_background_loop  # noqa: E402

N = int(os.environ.get("BENCH_N", "600"))
FRESH_N = int(os.environ.get("BENCH_MCP_SPAWNS", "5"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CACHE = Path.home() / ".cache" / "echo-tools-tests"
EVERYTHING = CACHE / "npm" / "node_modules" / ".bin" / "mcp-server-everything"
FILESYSTEM = CACHE / "npm-bench" / "node_modules" / ".bin" / "mcp-server-filesystem"
MEMORY = CACHE / "npm-bench" / "node_modules" / ".bin" / "mcp-server-memory"
TIME = CACHE / "pypi-venv" / "bin" / "mcp-server-time"
GIT = CACHE / "pypi-venv" / "bin" / "mcp-server-git"
CALC = Path(__file__).resolve().parent.parent / "tests" / "echo_tools" / "mcp_servers" / "calc_server.py"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_everything_http() -> tuple[subprocess.Popen[bytes], str]:
    """server-everything's streamable HTTP transport (it listens on every interface; we call 127.0.0.1)."""
    port = free_port()
    process = subprocess.Popen(
        [str(EVERYTHING), "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return process, f"http://127.0.0.1:{port}/mcp"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError("server-everything (streamableHttp) did not listen within 30 s")


def ours_config(conn: dict[str, Any]) -> dict[str, Any]:
    """An `mcpServers` entry from an adapters connection."""
    if conn["transport"] == "stdio":
        return {"command": conn["command"], "args": conn["args"]}
    return {"url": conn["url"]}


def stdio(command: Path | str, *args: str) -> dict[str, Any]:
    return {"transport": "stdio", "command": str(command), "args": list(args)}


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


# -- discovery --------------------------------------------------------------------------------------------


async def discovery(name: str, conn: dict[str, Any]) -> tuple[float, float, int, int]:
    """(ours ms, adapters ms, our tool count, their tool count), turns alternated over ROUNDS."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    samples: dict[str, list[float]] = {"ours": [], "theirs": []}
    counts = {"ours": 0, "theirs": 0}

    async def ours() -> None:
        registry = ToolRegistry(egress=EgressPolicy.local())
        found = await asyncio.to_thread(registry.add_mcp_server, name, ours_config(conn))
        counts["ours"] = len(found)

    async def theirs() -> None:
        client = MultiServerMCPClient({name: conn})  # type: ignore[dict-item]
        tools = await client.get_tools(server_name=name)
        counts["theirs"] = len(tools)

    await ours()  # warm-up: imports and first connections are paid by neither side's figure
    await theirs()
    for turn in range(ROUNDS):
        for side in ("ours", "theirs") if turn % 2 == 0 else ("theirs", "ours"):
            start = time.perf_counter()
            await (ours() if side == "ours" else theirs())
            samples[side].append(time.perf_counter() - start)
    return median_ms(samples["ours"]), median_ms(samples["theirs"]), counts["ours"], counts["theirs"]


async def config_discovery(connections: dict[str, dict[str, Any]]) -> dict[str, float]:
    """7 servers of one config: ours (concurrent and one after another) and the adapters' (concurrent)."""
    from langchain_mcp_adapters.client import MultiServerMCPClient

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "mcp.json")
        path.write_text(json.dumps({"mcpServers": {n: ours_config(c) for n, c in connections.items()}}))
        ours: list[float] = []
        theirs: list[float] = []
        serial: list[float] = []
        for turn in range(ROUNDS):
            for side in ("ours", "theirs") if turn % 2 == 0 else ("theirs", "ours"):
                start = time.perf_counter()
                if side == "ours":
                    registry = ToolRegistry(egress=EgressPolicy.local())
                    added = await asyncio.to_thread(registry.load_mcp_config, path)
                    ours.append(time.perf_counter() - start)
                    assert len(added) == len(connections), sorted(added)
                else:
                    tools = await MultiServerMCPClient(connections).get_tools()  # type: ignore[arg-type]
                    theirs.append(time.perf_counter() - start)
                    assert tools
            registry = ToolRegistry(egress=EgressPolicy.local())
            start = time.perf_counter()
            for name, conn in connections.items():
                await asyncio.to_thread(registry.add_mcp_server, name, ours_config(conn))
            serial.append(time.perf_counter() - start)
    return {"ours": median_ms(ours), "adapters": median_ms(theirs), "serial": median_ms(serial)}


# -- per call ---------------------------------------------------------------------------------------------


async def per_call(name: str, conn: dict[str, Any], tool: str, args: dict[str, Any]) -> dict[str, float]:
    from langchain_mcp_adapters.client import MultiServerMCPClient
    from langchain_mcp_adapters.tools import load_mcp_tools

    from workflow_bridge.langgraph_tools import to_langchain_tool

    registry = ToolRegistry(egress=EgressPolicy.local())
    await asyncio.to_thread(registry.add_mcp_server, name, ours_config(conn))
    ours = next(t for t in registry.list_all() if t.execution_config.get("tool") == tool)
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    ours_lc = to_langchain_tool(ours, executor)
    client = MultiServerMCPClient({name: conn})  # type: ignore[dict-item]
    try:
        first = await executor.invoke(ours.tool_id, args)
        assert first.success, first.error
        async with client.session(name) as session:
            theirs = next(t for t in await load_mcp_tools(session) if t.name == tool)
            assert await theirs.ainvoke(args)
            assert await ours_lc.ainvoke(args)
            paths: dict[str, Callable[[], Awaitable[Any]]] = {
                "ours": lambda: executor.invoke(ours.tool_id, args),
                "ours_lc": lambda: ours_lc.ainvoke(args),
                "persistent": lambda: theirs.ainvoke(args),
            }
            figures = await interleaved(paths, N)
    finally:
        await executor.aclose()
    default_tool = next(t for t in await client.get_tools() if t.name == tool)
    figures["default"] = await ameasure(lambda: default_tool.ainvoke(args), FRESH_N, warmup=1)
    return figures


# -- features ---------------------------------------------------------------------------------------------

FEATURES = [
    # (feature, echo-tools, langchain-mcp-adapters 0.3.2 — read in its installed source)
    (
        "content blocks to the model",
        "LangChain: text + image blocks; CrewAI: text with each block summarised; resource links "
        "readable by `<server>_read_resource`; base64 never in a prompt (docs/mcp.md)",
        "text, image, file blocks (`tools._convert_mcp_content_to_lc_block`); audio raises "
        "NotImplementedError; structuredContent as the artifact",
    ),
    (
        "progress",
        "`tool.progress` events on every call with a sink (run display, LangGraph custom stream)",
        "`Callbacks(on_progress=...)` (callbacks.py)",
    ),
    ("logging", "`tool.log` events during a call", "`Callbacks(on_logging_message=...)`"),
    (
        "resources",
        "`echo-tools mcp resources NAME`; catalogue tool `<server>_read_resource` through the executor",
        "`client.get_resources()` -> Blobs (resources.py); not tools",
    ),
    (
        "prompts",
        "`echo-tools mcp prompts NAME`; catalogue tool `<server>_get_prompt`",
        "`client.get_prompt()` -> LangChain messages (prompts.py)",
    ),
    (
        "elicitation",
        "host handler, declined by default; LangGraph interrupt in a workflow (branch mcpclient)",
        "`Callbacks(on_elicitation=...)`",
    ),
    (
        "sampling",
        "the calling agent's LLM within a token budget, with events (branch mcpclient)",
        "none of its own: the SDK's `sampling_callback` via `session_kwargs`",
    ),
    (
        "roots",
        "the registry's configured folders (branch mcpclient)",
        "none of its own: the SDK's `list_roots_callback` via `session_kwargs`",
    ),
    (
        "OAuth / auth",
        "OAuth 2.1 via the SDK's OAuthClientProvider, tokens in the encrypted credential store; "
        "stored bearer/api-key/basic/client-credentials; any httpx.Auth (branch mcpauth)",
        "`auth: httpx.Auth` on HTTP connections (sessions.py); the host builds an OAuthClientProvider "
        "and its token storage itself",
    ),
    (
        "sessions",
        "one pooled session per server, reconnect after a crash, cancel on timeout",
        "default: a new session (a new process for stdio) per call; persistent via `client.session()`",
    ),
]


def markdown(headers: list[str], rows: list[list[Any]]) -> str:
    def cell(value: Any) -> str:
        return f"{value:,.0f}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def missing() -> list[Path]:
    return [p for p in (EVERYTHING, FILESYSTEM, MEMORY, TIME, GIT) if not p.exists()]


INTEROP_V2 = Path(__file__).resolve().parent.parent / "tests" / "echo_tools" / "mcp_servers" / "interop_v2.py"


def start_interop_http() -> tuple[subprocess.Popen[str], str]:
    """interop_v2.py over streamable HTTP on a free loopback port (it prints `PORT <n>`)."""
    process = subprocess.Popen(
        [sys.executable, str(INTEROP_V2), "--http", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"interop_v2.py did not report its port: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}/mcp"


@asynccontextmanager
async def held_on_background(client: Any) -> AsyncIterator[Any]:
    """`client` entered (and left) by one task on echo-tools' background loop, where its sessions live."""
    from echo_tools.runtime import background_loop

    loop = background_loop()
    entered: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    caller = asyncio.get_running_loop()
    leave = asyncio.Event()  # set on the background loop

    async def hold() -> None:
        async with client:
            caller.call_soon_threadsafe(entered.set_result, client)
            await leave.wait()

    held = asyncio.run_coroutine_threadsafe(hold(), loop)
    try:
        yield await entered
    finally:
        loop.call_soon_threadsafe(leave.set)
        await asyncio.wrap_future(held)


async def sdk2_warm_calls() -> list[list[Any]]:
    """A warm `echo` call through echo-tools against the raw 2.x SDK client, same server, same run."""
    from mcp import Client, StdioServerParameters

    process, url = start_interop_http()
    rows: list[list[Any]] = []
    try:
        for transport in ("stdio", "http"):
            registry = ToolRegistry(egress=EgressPolicy.local())
            if transport == "stdio":
                config: dict[str, Any] = {"command": sys.executable, "args": [str(INTEROP_V2)]}
                target: Any = StdioServerParameters(command=sys.executable, args=[str(INTEROP_V2)])
            else:
                config, target = {"url": url}, url
            await asyncio.to_thread(registry.add_mcp_server, "interop", config)
            executor = ToolExecutor(registry, egress=EgressPolicy.local())
            args = {"text": "hello"}
            try:
                first = await executor.invoke("mcp_interop_echo", args)
                assert first.success and first.output == "echo: hello", first
                async with Client(target) as client, held_on_background(Client(target)) as far:
                    answer = await client.call_tool("echo", args)
                    assert answer.content[0].text == "echo: hello"  # type: ignore[union-attr]
                    paths: dict[str, Callable[[], Awaitable[Any]]] = {
                        "ours": lambda ex=executor, a=args: ex.invoke("mcp_interop_echo", a),
                        "raw": lambda c=client, a=args: c.call_tool("echo", a),
                        # where echo-tools keeps its sessions: the raw client, called across the same hop
                        "raw_hop": lambda c=far, a=args: on_background_loop(lambda: c.call_tool("echo", a)),
                    }
                    figures = await interleaved(paths, N)
                    protocol = client.protocol_version
            finally:
                await executor.aclose()
            rows.append([f"`echo` ({transport}, {protocol})", figures["ours"], figures["raw"],
                         f"{figures['ours'] / figures['raw']:.2f}x", figures["raw_hop"],
                         f"{figures['ours'] / figures['raw_hop']:.2f}x"])  # fmt: skip
            print(f"done: {transport}", file=sys.stderr, flush=True)
    finally:
        process.terminate()
        process.wait(10)
    return rows


async def main_sdk2() -> None:
    from importlib.metadata import version

    started = time.perf_counter()
    rows = await sdk2_warm_calls()
    print(f"mcp {version('mcp')} (langchain-mcp-adapters needs mcp<2: not installable here), N={N}\n")
    print("Warm call, echo-tools against the raw SDK client `mcp.Client` (median us; target <= 1.2x). The")
    print("last two columns: the raw client kept on echo-tools' background loop and called across the same")
    print("thread hop as an echo-tools call (its sessions live there), which is most of the difference.\n")
    print(
        markdown(
            [
                "tool (transport, protocol)",
                "ours: `executor.invoke`",
                "raw `client.call_tool`",
                "ours / raw",
                "raw, across the hop to the background loop",
                "ours / that",
            ],  # fmt: skip
            rows,
        )
    )
    print(f"\ntotal {time.perf_counter() - started:.0f} s", file=sys.stderr)


async def main() -> None:
    from importlib.metadata import version

    from echo_tools.compat.mcp import GENERATION

    if GENERATION >= 2:
        await main_sdk2()
        return
    import langchain_mcp_adapters  # noqa: F401  (the `bench` extra)

    if missing():  # `make bench` installs them (npm and PyPI); without Node.js the comparison cannot run
        print(f"not run: servers not installed: {[str(p) for p in missing()]}; see this file's docstring")
        return
    started = time.perf_counter()
    process, url = start_everything_http()
    scratch = tempfile.TemporaryDirectory()
    repo = Path(scratch.name, "repo")
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    try:
        cases = [
            ("everything", "stdio", stdio(EVERYTHING, "stdio"), "echo", {"message": "hello"}),
            (
                "everything",
                "http",
                {"transport": "streamable_http", "url": url},
                "echo",
                {"message": "hello"},
            ),
            ("time", "stdio", stdio(TIME), "get_current_time", {"timezone": "UTC"}),
        ]
        call_rows: list[list[Any]] = []
        discovery_rows: list[list[Any]] = []
        for name, transport, conn, tool, args in cases:
            ours_ms, theirs_ms, ours_n, theirs_n = await discovery(name, conn)
            discovery_rows.append(
                [
                    f"{name} ({transport})",
                    f"{ours_n} / {theirs_n}",
                    ours_ms,
                    theirs_ms,
                    f"{theirs_ms / ours_ms:.2f}x",
                ]
            )
            fig = await per_call(name, conn, tool, args)
            persistent = fig["persistent"]
            for label, key in (
                ("ours: `executor.invoke` (pooled session)", "ours"),
                ("ours: LangChain tool (`to_langchain_tool`)", "ours_lc"),
                ("adapters: tool on a persistent session", "persistent"),
                ("adapters: default tool (session per call)", "default"),
            ):
                call_rows.append(
                    [f"{name} `{tool}` ({transport})", label, fig[key], f"{fig[key] / persistent:.2f}x"]
                )
            print(f"done: {name} {transport}", file=sys.stderr, flush=True)
        seven = {
            "everything": stdio(EVERYTHING, "stdio"),
            "everything_http": {"transport": "streamable_http", "url": url},
            "filesystem": stdio(FILESYSTEM, scratch.name),
            "memory": stdio(MEMORY),
            "time": stdio(TIME),
            "git": stdio(GIT, "--repository", str(repo)),
            "calc": stdio(sys.executable, str(CALC)),
        }
        config = await config_discovery(seven)
    finally:
        process.terminate()
        process.wait(10)
        scratch.cleanup()
    print(f"langchain-mcp-adapters {version('langchain-mcp-adapters')}, mcp {version('mcp')}, N={N}\n")
    print("Per-call latency (median us; ratio against the adapters' persistent-session tool)\n")
    print(markdown(["server, tool (transport)", "path", "us", "ratio"], call_rows))
    print(f"\nDiscovery of one server (median ms of {ROUNDS}, turns alternated)\n")
    # ours also lists resources and prompts (catalogue tools) and registers every tool
    headers = ["server (transport)", "tools ours / theirs", "ours ms", "adapters ms", "adapters / ours"]
    print(markdown(headers, discovery_rows))
    print(f"\nDiscovery of 7 servers of one config (median ms of {ROUNDS}): {', '.join(seven)}\n")
    print(
        markdown(
            ["path", "ms"],
            [
                ["ours: `registry.load_mcp_config(file)` (concurrent)", config["ours"]],
                ["adapters: `MultiServerMCPClient(...).get_tools()` (concurrent)", config["adapters"]],
                ["ours: `add_mcp_server` one after another", config["serial"]],
            ],
        )
    )
    print("\nFeatures\n")
    print(markdown(["feature", "echo-tools", "langchain-mcp-adapters"], [list(f) for f in FEATURES]))
    print(f"\ntotal {time.perf_counter() - started:.0f} s", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main())
