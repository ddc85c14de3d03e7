"""What the one way out costs (issue 24): figures, not a test.

1. An `api` tool call through the executor on the egress client (each host resolved once and pinned, each
   body decoded under a bound), against the same call with the backend's client swapped for a plain
   `httpx.AsyncClient`, and for httpx-aiohttp's client (the transport before this change), to the same
   loopback service in the same run.
2. A 500-operation OpenAPI import with the totals (nodes after `$ref` expansion, stored bytes, tools per
   import) against the same import with them switched off.

Figures are CPU time of this process (`time.process_time`: the client, the executor and the loopback
service in its thread), which other processes on a shared machine disturb far less than wall time.

Run: .venv/bin/python bench/bench_egress.py
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from _common import report  # noqa: E402
from bench_openapi import generated_spec  # noqa: E402

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry, ToolType  # noqa: E402
from echo_tools.openapi import document, import_openapi, importer  # noqa: E402

BODY = b'{"ok": true, "items": [1, 2, 3]}'
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
    len(BODY),
    BODY,
)
CALLS = 300  # per round; rounds interleave the variants, so load on a shared machine hits each alike
ROUNDS = 20
IMPORT_ROUNDS = 10


def start_service() -> tuple[str, Callable[[], None]]:
    """A keep-alive HTTP/1.1 service on 127.0.0.1 in its own thread and loop, answering every GET at once."""
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await reader.readuntil(b"\r\n\r\n")
                writer.write(ANSWER)
                await writer.drain()
        except (
            asyncio.IncompleteReadError,
            ConnectionError,
            asyncio.CancelledError,
        ):  # client gone, or shutdown
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        state["port"] = server.sockets[0].getsockname()[1]
        state["loop"], state["stop"] = asyncio.get_running_loop(), asyncio.Event()
        ready.set()
        async with server:
            await state["stop"].wait()

    thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    return f"http://127.0.0.1:{state['port']}/items", lambda: state["loop"].call_soon_threadsafe(
        state["stop"].set
    )


async def cpu_us(call: Callable[[], Any], n: int) -> float:
    """CPU microseconds of this process per `await call()`, over `n` calls after a short warm-up."""
    for _ in range(20):
        await call()
    start = time.process_time()
    for _ in range(n):
        await call()
    return (time.process_time() - start) / n * 1e6


def executor_for(url: str) -> ToolExecutor:
    registry = ToolRegistry(storage_dir=None, egress=EgressPolicy.local())
    registry.register(
        {
            "name": "Items",
            "tool_type": "api",
            "input_schema": {"type": "object", "properties": {}},
            "execution_config": {"url": url, "method": "GET"},
        }
    )
    return ToolExecutor(registry, egress=EgressPolicy.local())


async def api_call_figures(url: str) -> list[tuple[str, float]]:
    from httpx_aiohttp import HttpxAiohttpClient

    variants: dict[str, Callable[[], httpx.AsyncClient] | None] = {
        "egress client (pinned, bounded)": None,
        "plain httpx.AsyncClient": lambda: httpx.AsyncClient(trust_env=False, follow_redirects=False),
        "httpx-aiohttp client (before)": lambda: HttpxAiohttpClient(trust_env=False, follow_redirects=False),
    }
    medians: dict[str, list[float]] = {name: [] for name in variants}
    executors, clients = {}, []
    for name, make in variants.items():
        executor = executor_for(url)
        if make is not None:
            client = make()
            clients.append(client)
            executor.backend_for(ToolType.API).client = lambda client=client: client  # type: ignore[method-assign]
        executors[name] = executor
    for round_ in range(ROUNDS):  # interleaved rounds, alternating order: drift hits every variant alike
        for name, executor in list(executors.items())[:: 1 if round_ % 2 else -1]:
            medians[name].append(await cpu_us(lambda executor=executor: executor.invoke("Items", {}), CALLS))
    for executor in executors.values():
        await executor.aclose()
    for client in clients:
        await client.aclose()
    return [(name, statistics.median(values)) for name, values in medians.items()]


def import_figures() -> list[tuple[str, float]]:
    spec = generated_spec(500, variety="wording")

    def once() -> float:
        registry = ToolRegistry(storage_dir=None, egress=EgressPolicy())
        start = time.process_time()
        tools = import_openapi(registry, spec, provider="gen")
        elapsed = (time.process_time() - start) * 1000
        assert len(tools) == 500
        return elapsed

    checks = (importer._check_stored_bytes, importer._check_operation_count, document.MAX_IMPORT_NODES)
    with_totals, without = [], []
    once()
    for round_ in range(IMPORT_ROUNDS):
        if round_ % 2:
            with_totals.append(once())
        importer._check_stored_bytes = lambda planned: None  # type: ignore[assignment]
        importer._check_operation_count = lambda found, wanted: None  # type: ignore[assignment]
        document.MAX_IMPORT_NODES = 10**12
        try:
            without.append(once())
        finally:
            importer._check_stored_bytes, importer._check_operation_count, document.MAX_IMPORT_NODES = checks
        if not round_ % 2:
            with_totals.append(once())
    return [("with the totals", statistics.median(with_totals)), ("without", statistics.median(without))]


def main() -> None:
    url, stop = start_service()
    try:
        calls = asyncio.run(api_call_figures(url))
    finally:
        stop()
    base = calls[0][1]
    report(
        [
            (name, f"{us:,.0f} us CPU", f"{base / us:.2f}x" if i else "1.00x")
            for i, (name, us) in enumerate(calls)
        ],
        title=f"api tool call, executor.invoke, loopback service (median of {ROUNDS} rounds x {CALLS} calls); "
        "ratio: pinned / other",
    )
    imports = import_figures()
    report(
        [(name, f"{ms:,.1f} ms CPU", f"{imports[0][1] / ms:.2f}x") for name, ms in imports],
        title=f"500-operation OpenAPI import (median of {IMPORT_ROUNDS}); ratio: with totals / this",
    )


if __name__ == "__main__":
    main()
