"""`api` tool calls against a minimal aiohttp server on 127.0.0.1 (in a subprocess), in one run.

Rows: a new `httpx.AsyncClient` per call (what EchoAI does); one shared plain httpx client; our `api`
backend through the executor (validation, egress check, events; httpx API on the aiohttp transport);
raw aiohttp. One call at a time (median ms per call) and 50 concurrent (requests per second).

Run: .venv/bin/python bench/bench_api.py
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import warnings

warnings.simplefilter("ignore")

from _common import ameasure, report, throughput  # noqa: E402

from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor, ToolRegistry  # noqa: E402

SEQUENTIAL = int(os.environ.get("BENCH_N", "2000"))
CONCURRENT_TOTAL = int(os.environ.get("BENCH_TOTAL", "5000"))
CONCURRENCY = 50
PAYLOAD = {"q": "tea", "n": 2}

SERVER = """
import asyncio, sys
from aiohttp import web

async def echo(request):
    return web.json_response({"ok": True, "got": await request.json()})

async def main():
    app = web.Application()
    app.router.add_post("/echo", echo)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def start_server() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(proc.stdout.readline())
    return proc, f"http://127.0.0.1:{port}/echo"


async def run(url: str) -> list[tuple[str, float, float | str]]:
    import aiohttp
    import httpx

    registry = ToolRegistry(egress=EgressPolicy.local())
    registry.register(
        {"name": "echo api", "tool_type": "api", "execution_config": {"url": url, "method": "POST"}}
    )
    log = MemoryEventLog()
    executor = ToolExecutor(registry, [log], egress=EgressPolicy.local())
    result = await executor.invoke("echo api", PAYLOAD)
    assert result.success and result.output == {"ok": True, "got": PAYLOAD}, result

    async def ours() -> None:
        await executor.invoke("echo api", PAYLOAD)
        if len(log.events) > 10_000:
            log.events.clear()

    shared = httpx.AsyncClient()

    async def plain_httpx() -> None:
        (await shared.post(url, json=PAYLOAD)).json()

    async def new_client() -> None:
        async with httpx.AsyncClient() as client:
            (await client.post(url, json=PAYLOAD)).json()

    session = aiohttp.ClientSession()

    async def raw_aiohttp() -> None:
        async with session.post(url, json=PAYLOAD) as response:
            await response.json()

    rows: list[tuple[str, float, float | str]] = []
    for name, fn, n, concurrent in (
        ("new httpx.AsyncClient per call (EchoAI)", new_client, 40, False),
        ("shared httpx.AsyncClient", plain_httpx, SEQUENTIAL, True),
        ("echo api backend via executor", ours, SEQUENTIAL, True),
        ("raw aiohttp ClientSession", raw_aiohttp, SEQUENTIAL, True),
    ):
        ms = await ameasure(fn, n, warmup=20) / 1000
        rps: float | str = await throughput(fn, CONCURRENT_TOTAL, CONCURRENCY) if concurrent else "-"
        rows.append((name, ms, rps))
    await shared.aclose()
    await session.close()
    await executor.aclose()
    return rows


def main() -> None:
    proc, url = start_server()
    try:
        rows = asyncio.run(run(url))
    finally:
        proc.terminate()
        proc.wait(5)
    report(
        rows,
        f"api tool against a minimal aiohttp server on 127.0.0.1 ({SEQUENTIAL} sequential calls, "
        f"{CONCURRENT_TOTAL} calls at {CONCURRENCY} concurrent)",
        ["client", "ms per call", f"req/s at {CONCURRENCY}"],
    )
    print("targets: < 0.4 ms per call sequential, > 3000 req/s at 50 concurrent (echo api backend)")


if __name__ == "__main__":
    main()
