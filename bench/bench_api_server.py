"""Invoke throughput through the HTTP API: 50 concurrent clients against a trivial local tool.

Each server runs in its own process (uvicorn on 127.0.0.1) so the client does not share its GIL. The stock
baseline is a plain FastAPI route calling the same function, served the same way and measured in the same
run; the ratio is what echo-tools' API (auth check, validation, executor, events, metrics) costs on top.

    .venv/bin/python bench/bench_api_server.py [--requests 2000] [--clients 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import report  # noqa: E402

KEY = "bench-api-key-123"
TOOL = {
    "name": "Bench Add",
    "tool_id": "tool_bench_add",
    "tool_type": "local",
    "side_effect": "pure",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    },
    "execution_config": {"module": "_common", "function": "add"},
}


def build_app(mode: str, storage: str):
    if mode == "stock":
        from _common import add
        from fastapi import Body, FastAPI

        app = FastAPI()

        @app.post("/add")
        async def stock_add(data: dict = Body(...)) -> dict:
            return {"success": True, "output": add(data["a"], data["b"])}

        @app.get("/tools/health")
        async def health() -> dict:
            return {"status": "healthy"}

        return app
    from echo_tools.api import create_app
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry
    from echo_tools.settings import ApiSettings

    registry = ToolRegistry(storage_dir=storage, allowed_modules=("_common",))
    registry.register(TOOL)
    return create_app(registry, ToolExecutor(registry), ApiSettings(api_key=KEY))


def serve(port: int, mode: str) -> None:
    import uvicorn

    with tempfile.TemporaryDirectory() as storage:
        uvicorn.run(
            build_app(mode, storage), host="127.0.0.1", port=port, log_level="error", access_log=False
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(mode: str) -> tuple[subprocess.Popen, str]:
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), mode], cwd=HERE.parent)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:  # bounded wait for readiness
        try:
            if httpx.get(f"{url}/tools/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the {mode} server did not start (exit code {proc.poll()})")


async def hammer(url: str, path: str, total: int, clients: int) -> tuple[float, float]:
    """Requests per second and median latency (ms) with `clients` concurrent workers."""
    import httpx

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    latencies: list[float] = []
    remaining = total
    async with httpx.AsyncClient(
        base_url=url, limits=limits, headers={"X-API-Key": KEY}, timeout=30
    ) as client:
        for _ in range(20):  # warm-up: connections and the tool's first import
            (await client.post(path, json={"a": 1, "b": 2})).raise_for_status()

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                response = await client.post(path, json={"a": 1, "b": 2})
                latencies.append(time.perf_counter() - started)
                response.raise_for_status()

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return total / elapsed, latencies[len(latencies) // 2] * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "MODE"))
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return 0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    rows = []
    results = {}
    for mode, path in (("stock", "/add"), ("echo-tools", "/tools/invoke/bench_add")):
        proc, url = start_server(mode)
        try:
            rps, p50 = asyncio.run(hammer(url, path, args.requests, args.clients))
        finally:
            proc.terminate()
            proc.wait(10)
        results[mode] = rps
        rows.append((mode, rps, p50))
    report(
        [(m, r, p, results["stock"] / r) for m, r, p in rows],
        title=f"HTTP invoke, {args.clients} concurrent clients, {args.requests} requests, uvicorn on 127.0.0.1",
        headers=("server", "req/s", "p50 ms", "stock/this"),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
