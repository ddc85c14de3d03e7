"""MCP per-call latency over stdio and streamable HTTP, in one run, against the MCP SDK used directly.

Rows per transport, all calling the `add` tool (FastMCP, with an outputSchema) of
tests/echo_tools/mcp_servers/calc_server.py:
  - ours: `await executor.invoke(...)` on the executor's pooled session (input and output validated once
    by the executor, events off), called from the benchmark's own event loop (so every call hops to the
    background loop that owns the session and back);
  - SDK persistent: `ClientSession.call_tool` on one open session (the SDK validates structuredContent
    against the cached outputSchema with jsonschema on every call);
  - SDK persistent, no validation: `send_request(CallToolRequest)` on one open session (the floor);
  - session per call: open the transport and a session, initialize, call_tool, close (what
    langchain-mcp-adapters' tools and CrewAI's MCP tool do); fewer iterations.
The three persistent rows run in alternating batches (the machine is shared; its load drifts). Medians in
microseconds; ratios against the SDK persistent session.

Run: .venv/bin/python bench/bench_mcp.py   (BENCH_N=1500 stdio calls per persistent row, N/5 over HTTP)
"""

from __future__ import annotations

import asyncio
import gc
import os
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")

from _common import ameasure, report  # noqa: E402

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry  # noqa: E402

N = int(os.environ.get("BENCH_N", "1500"))
CALLS = {"stdio": N, "http": max(50, N // 5)}  # an HTTP call costs ~5x a stdio call on the server side
PER_CALL_N = {"stdio": int(os.environ.get("BENCH_MCP_SPAWNS", "5")), "http": 20}
SERVER = Path(__file__).resolve().parent.parent / "tests" / "echo_tools" / "mcp_servers" / "calc_server.py"
ARGS = {"a": 1, "b": 2}


def start_http_server() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline()  # "PORT <n>" once the socket listens
    if not line.startswith("PORT "):
        process.kill()
        raise RuntimeError(f"calc_server.py --http did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}/mcp"


@asynccontextmanager
async def sdk_session(transport: str, url: str) -> AsyncIterator[Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if transport == "stdio":
        opened = stdio_client(StdioServerParameters(command=sys.executable, args=[str(SERVER)]))
    else:
        opened = streamable_http_client(url)
    async with opened as streams, ClientSession(streams[0], streams[1]) as session:
        await session.initialize()
        yield session


async def interleaved(
    paths: dict[str, Callable[[], Awaitable[Any]]], total: int, batch: int = 25
) -> dict[str, float]:
    """Median microseconds per call of each path, measured in alternating batches.

    This machine is shared, so its load drifts; alternating batches of every path spreads the drift over
    all rows instead of charging it to whichever row happened to run during a busy moment.
    """
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for fn in paths.values():
        for _ in range(max(10, total // 10)):
            await fn()
    gc.collect()
    for _ in range(max(1, total // batch)):
        for name, fn in paths.items():
            for _ in range(batch):
                start = time.perf_counter()
                await fn()
                samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) * 1e6 for name, values in samples.items()}


async def measure_transport(transport: str, url: str) -> dict[str, float]:
    from mcp import types

    registry = ToolRegistry(egress=EgressPolicy.local())
    if transport == "stdio":
        registry.add_mcp_server("calc", {"command": sys.executable, "args": [str(SERVER)]})
    else:
        registry.add_mcp_server("calc", {"url": url})
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    request = types.ClientRequest(
        types.CallToolRequest(params=types.CallToolRequestParams(name="add", arguments=ARGS))
    )
    try:
        first = await executor.invoke("calc_add", ARGS)
        assert first.success and first.output == {"result": 3.0}, first.error
        async with sdk_session(transport, url) as session:
            assert (await session.call_tool("add", ARGS)).structuredContent == {"result": 3.0}
            figures = await interleaved(
                {
                    "ours": lambda: executor.invoke("calc_add", ARGS),
                    "sdk": lambda: session.call_tool("add", ARGS),
                    "floor": lambda: session.send_request(request, types.CallToolResult),
                },
                CALLS[transport],
            )
    finally:
        await executor.aclose()

    async def per_call() -> None:
        async with sdk_session(transport, url) as session:
            await session.call_tool("add", ARGS)

    figures["fresh"] = await ameasure(per_call, PER_CALL_N[transport], warmup=1)
    return figures


async def main() -> None:
    started = time.perf_counter()
    process, url = start_http_server()
    rows = []
    try:
        for transport in ("stdio", "http"):
            figures = await measure_transport(transport, url)
            mine, persistent, floor, fresh = (figures[k] for k in ("ours", "sdk", "floor", "fresh"))
            rows += [
                (transport, "ours: executor.invoke, pooled session", mine, mine / persistent),
                (transport, "SDK call_tool, persistent session", persistent, 1.0),
                (transport, "SDK send_request, no output validation", floor, floor / persistent),
                (transport, "new session per call (adapters, CrewAI)", fresh, fresh / persistent),
            ]
            print(
                f"{transport}: ours {mine:,.0f} us = {mine / persistent:.2f}x the SDK persistent session, "
                f"{fresh / mine:,.0f}x faster than a session per call",
                flush=True,
            )
    finally:
        process.terminate()
        process.wait(10)
    report(
        rows,
        "MCP per-call latency (median us; ratio vs SDK persistent)",
        ["transport", "path", "us", "ratio"],
    )
    print(
        f"total {time.perf_counter() - started:.1f} s, calls per persistent row {CALLS}, per-call rows {PER_CALL_N}"
    )


if __name__ == "__main__":
    asyncio.run(main())
