"""The gate's cost and its refusal of a fan-out, through the HTTP API, in one run.

1. Invoke throughput (50 concurrent clients, uvicorn on 127.0.0.1, a trivial local tool): a server with
   three principals (the gated requests use the IDE key: a hashed-key lookup, an action check, a permission
   ceiling and a budget meter per request) against the same server with one operator key. Both servers are
   started and warmed alike before any run; each run is cut into blocks sent A B B A A B B A..., so a
   change of the machine's load during a run weighs on both alike (a shared 2-core machine moved whole
   runs by +-30 %). Req/s of a run is its requests over the summed time of its blocks; the server CPU per
   request is reported too. Every run and the worst ratio are reported (goal >= 0.9x).
2. The 64-wide fan-out attack (a skill of 64 steps each a skill of 64 steps: 4,096 calls in one request)
   sent with the IDE key: the answer (429 `budget`), the server's CPU seconds spent on it, and the slowest
   `/tools/health` answer while it ran (goal: refused within 1 s of CPU, health within 100 ms throughout).

    .venv/bin/python bench/bench_gate.py [--runs 5] [--requests 2000] [--clients 50] [--blocks 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import report  # noqa: E402
from bench_api_server import (  # noqa: E402
    IDE_KEY,
    INVOKE,
    KEY,
    cpu_seconds,
    free_port,
    hammer,
    ratio_rows,
    start_server,
)


def _skill(tool_id: str, inner: str, width: int) -> dict[str, Any]:
    steps = [
        {"id": f"s{i}", "tool": inner, "input": {"a": "$.input.a", "b": "$.input.b"}} for i in range(width)
    ]
    schema = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    return {"tool_id": tool_id, "name": tool_id, "tool_type": "skill", "input_schema": schema,
            "execution_config": {"steps": steps}, "timeout_ms": 60_000}  # fmt: skip


def serve_fanout(port: int) -> None:
    import uvicorn
    from bench_api_server import build_app

    with tempfile.TemporaryDirectory() as storage:
        app = build_app("gate", storage)
        registry = app.state.echo_tools.registry
        registry.register(_skill("inner_wide", "tool_bench_add", 64))
        registry.register(_skill("outer_wide", "inner_wide", 64))
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


async def fanout_attack() -> dict[str, Any]:
    import httpx

    port = free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve-fanout", str(port)], cwd=HERE.parent)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # bounded wait for readiness
            try:
                if httpx.get(f"{url}/tools/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit("the fan-out server did not start") from None
                time.sleep(0.05)
        async with httpx.AsyncClient(base_url=url, timeout=120) as client:
            before = cpu_seconds(proc.pid)
            attack = asyncio.create_task(
                client.post("/tools/invoke/outer_wide", json={"a": 1, "b": 2}, headers={"X-API-Key": IDE_KEY})
            )
            slowest = 0.0
            while not attack.done():
                started = time.perf_counter()
                (await client.get("/tools/health")).raise_for_status()
                slowest = max(slowest, time.perf_counter() - started)
                await asyncio.sleep(0.01)
            response = await attack
            cpu = cpu_seconds(proc.pid) - before
    finally:
        proc.terminate()
        proc.wait(10)
    body = response.json()
    return {"status": response.status_code, "error_type": body.get("error_type"), "field": body.get("field"),
            "server_cpu_s": cpu, "slowest_health_ms": slowest * 1000}  # fmt: skip


WARM_UP = 500  # requests each server gets before the first measured block (imports, caches, connections)


def interleaved(
    modes: list[tuple[str, str, str, str]], runs: int, total: int, clients: int, blocks: int
) -> list[dict[str, Any]]:
    """Each `(label, server mode, path, key)` server started and warmed once; each run sends `total`
    requests to each in `blocks` blocks, alternating A B B A ...; a row per run and label."""
    servers = {label: start_server(mode) for label, mode, _, _ in modes}
    rows: list[dict[str, Any]] = []
    try:
        for label, _, path, key in modes:
            asyncio.run(hammer(servers[label][1], path, WARM_UP, clients, key))
        size = max(1, total // blocks)
        for run in range(1, runs + 1):
            spent = {
                label: {"s": 0.0, "n": 0, "cpu": 0.0, "p50": [], "p99": [], "failed": 0}
                for label, *_ in modes
            }
            for block in range(blocks):
                order = modes if (block + run) % 2 else list(reversed(modes))
                for label, _, path, key in order:
                    proc, url = servers[label]
                    cpu = cpu_seconds(proc.pid)
                    measured = asyncio.run(hammer(url, path, size, clients, key))
                    acc = spent[label]
                    acc["cpu"] += cpu_seconds(proc.pid) - cpu
                    acc["s"] += size / measured["rps"]
                    acc["n"] += size + 20  # hammer's own 20 warm-up requests count in the CPU
                    acc["p50"].append(measured["p50"])
                    acc["p99"].append(measured["p99"])
                    acc["failed"] += measured["failed"]
            for label, acc in spent.items():
                rows.append({"run": run, "label": label, "rps": size * blocks / acc["s"],
                             "p50": sorted(acc["p50"])[len(acc["p50"]) // 2], "p99": max(acc["p99"]),
                             "failed": acc["failed"], "cpu_us": acc["cpu"] / acc["n"] * 1e6})  # fmt: skip
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--blocks", type=int, default=8, help="interleaved blocks per run and server")
    parser.add_argument("--serve-fanout", type=int, metavar="PORT")
    args = parser.parse_args()
    if args.serve_fanout:
        serve_fanout(args.serve_fanout)
        return 0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    modes = [("operator key", "operator", INVOKE, KEY), ("gate, 3 principals", "gate", INVOKE, IDE_KEY)]
    rows = interleaved(modes, args.runs, args.requests, args.clients, args.blocks)
    table = ratio_rows(rows, modes[0][0], modes[1][0])
    report(
        table,
        title=(f"HTTP invoke through the gate, {args.clients} clients, {args.requests} requests per run and "
               f"server in {args.blocks} interleaved blocks"),
        headers=("run", "1 key req/s", "gate req/s", "gate/1 key", "1 key p50", "gate p50", "p50 x", "gate p99",
                 "1 key cpu us", "gate cpu us", "1 key/gate cpu", "failed"),
    )  # fmt: skip
    print(f"worst gate/1-key req/s: {min(r[3] for r in table):.2f}")
    attack = asyncio.run(fanout_attack())
    print(
        "64-wide fan-out attack:", {k: round(v, 3) if isinstance(v, float) else v for k, v in attack.items()}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
