"""The gate's cost and its refusal of a fan-out, through the HTTP API, in one run.

1. Invoke throughput (50 concurrent clients, uvicorn on 127.0.0.1, a trivial local tool): a server with
   three principals (the gated requests use the IDE key: a hashed-key lookup, an action check, a permission
   ceiling and a budget meter per request) against the same server with one operator key. Measured in turns,
   run after run (the order alternating); every run and the worst ratio are reported (goal >= 0.9x).
2. The 64-wide fan-out attack (a skill of 64 steps each a skill of 64 steps: 4,096 calls in one request)
   sent with the IDE key: the answer (429 `budget`), the server's CPU seconds spent on it, and the slowest
   `/tools/health` answer while it ran (goal: refused within 1 s of CPU, health within 100 ms throughout).

    .venv/bin/python bench/bench_gate.py [--runs 5] [--requests 2000] [--clients 50]
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
from bench_api_server import IDE_KEY, INVOKE, KEY, compare, cpu_seconds, free_port, ratio_rows  # noqa: E402


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


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--serve-fanout", type=int, metavar="PORT")
    args = parser.parse_args()
    if args.serve_fanout:
        serve_fanout(args.serve_fanout)
        return 0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    modes = [("operator key", "operator", INVOKE, KEY), ("gate, 3 principals", "gate", INVOKE, IDE_KEY)]
    table = ratio_rows(compare(modes, args.runs, args.requests, args.clients), modes[0][0], modes[1][0])
    report(
        table,
        title=f"HTTP invoke through the gate, {args.clients} clients, {args.requests} requests per run",
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
