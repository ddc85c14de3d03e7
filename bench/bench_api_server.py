"""Invoke throughput through the HTTP API: 50 concurrent clients against a trivial local tool.

Each server runs in its own process (uvicorn on 127.0.0.1) so the client does not share its GIL. The stock
baseline is a plain FastAPI route calling the same function, served the same way and measured in the same
run; the ratio is what echo-tools' API (the gate with three principals, validation, executor, events,
metrics) costs on top. The stock route calls the function on the event loop, so the tool is an `inline`
tool, which echo-tools runs the same way; the same tool on a worker thread (a sync function's default,
where a timeout stops the wait) is measured in the same runs and reported on a line of its own. The servers are measured in turns, run after run (the order alternating), so a
machine whose load changes meanwhile weighs on both alike; every run is reported, and the worst ratio.

    .venv/bin/python bench/bench_api_server.py [--runs 5] [--requests 2000] [--clients 50]
    .venv/bin/python bench/bench_api_server.py --soak [--soak-requests 100000]

`--soak`: one echo-tools server with the history on and SSE subscribers attached, 100,000 requests at 50
concurrent clients; reports the server's RSS after warm-up and at the end, failed requests and p99.

`--postgres`: two more servers in the same run, both gated as above with the run history on: one with the
JSON catalogue and the SQLite history (the embedded stores), one with the catalogue and the history on
PostgreSQL, wired as `echo-tools serve --database-url` wires them (one pool, the registry reloaded on
NOTIFY, `/tools/events` following every replica). The PostgreSQL server is started here (initdb into a
temporary folder, fsync on, 127.0.0.1) and removed at the end; the second table is PostgreSQL / JSON store,
every run. With `--soak`, the soak runs on the PostgreSQL server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _common import report  # noqa: E402

# the three principals of a gated server: the operator, an IDE key (invoke + run, restricted permissions,
# the key the gated runs use) and a read-only key
OPERATOR_KEY = "bench-operator-key-123"
IDE_KEY = "bench-ide-key-123456"
READER_KEY = "bench-reader-key-1234"
KEY = OPERATOR_KEY
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
    # the function runs on the event loop, as the stock route calls it: an `inline` tool (a small pure
    # function; its timeout is checked when it returns). `echo-tools, thread tool` below runs the same
    # tool on a worker thread, the default for a sync function, whose timeout stops the wait.
    "execution_config": {"module": "_common", "function": "add", "isolation": "inline"},
}
THREAD_TOOL = {**TOOL, "execution_config": {"module": "_common", "function": "add"}}
INVOKE = "/tools/invoke/bench_add"


def principals() -> dict[str, Any]:
    from echo_tools.gate import hash_key, principals_from

    return principals_from(
        {
            "principals": [
                {"name": "ide", "key_sha256": hash_key(IDE_KEY), "actions": ["invoke", "run"],
                 "permissions": ["net:outbound", "fs:read"]},
                {"name": "reader", "key_sha256": hash_key(READER_KEY), "actions": ["history"]},
            ]
        }
    )  # fmt: skip


def build_app(mode: str, storage: str) -> Any:
    """`stock`: a bare FastAPI route; `operator`: echo-tools with one key; `gate`: three principals;
    `json`: three principals, the catalogue and the run history in `storage` (JSON files and SQLite);
    `pg`: three principals, the catalogue and the run history in the PostgreSQL database `$ECHO_BENCH_DSN`."""
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

    settings = ApiSettings(api_key=OPERATOR_KEY, principals=principals() if mode != "operator" else None)
    if mode in ("json", "pg"):
        return stored_app(mode, storage, settings)
    registry = ToolRegistry(storage_dir=storage, allowed_modules=("_common",))
    registry.register(THREAD_TOOL if mode == "gate-thread" else TOOL)
    return create_app(registry, ToolExecutor(registry), settings)


def stored_app(mode: str, storage: str, settings: Any) -> Any:
    """The app with the run history on, its stores wired as `echo-tools serve` wires them: the history is
    the executor's sink and holds the approvals and quota counts; on PostgreSQL one pool for everything,
    the registry reloaded when another replica changes the catalogue, `/tools/events` following them."""
    from echo_tools.api import create_app
    from echo_tools.executor import ToolExecutor
    from echo_tools.governance.wiring import governance_stores
    from echo_tools.history import RunHistory
    from echo_tools.registry import ToolRegistry

    stores: Any = None
    if mode == "pg":
        from echo_tools.pg import attach, open_stores

        stores = open_stores(os.environ["ECHO_BENCH_DSN"])
        registry = ToolRegistry(storage=stores.storage, allowed_modules=("_common",))
        attach(registry, stores)
        history: Any = stores.history
    else:
        registry = ToolRegistry(storage_dir=storage, allowed_modules=("_common",))
        history = RunHistory(storage)
    registry.register(TOOL)
    executor = ToolExecutor(registry, [history], **governance_stores(history))
    app = create_app(registry, executor, settings, history=history)
    if stores is not None:
        stores.history.follow(app.state.echo_tools.broadcaster)
    return app


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


def start_server(mode: str, dsn: str | None = None) -> tuple[subprocess.Popen[bytes], str]:
    """A server of `mode` in its own process (`dsn`: the PostgreSQL database of the `pg` mode)."""
    import httpx

    port = free_port()
    env = {**os.environ, **({"ECHO_BENCH_DSN": dsn} if dsn else {})}
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(port), mode], cwd=HERE.parent, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:  # bounded wait for readiness
        try:
            if httpx.get(f"{url}/tools/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"the {mode} server did not start (exit code {proc.poll()})")


async def hammer(url: str, path: str, total: int, clients: int, key: str = KEY) -> dict[str, float]:
    """Requests per second, median and 99th-percentile latency (ms), and failures, with `clients`
    concurrent workers sending `total` requests."""
    import httpx

    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    latencies: list[float] = []
    failed = 0
    failures: list[str] = []  # what the failed requests answered (the first few are printed)
    remaining = total
    async with httpx.AsyncClient(
        base_url=url, limits=limits, headers={"X-API-Key": key}, timeout=60
    ) as client:
        for _ in range(20):  # warm-up: connections and the tool's first import
            (await client.post(path, json={"a": 1, "b": 2})).raise_for_status()

        async def worker() -> None:
            nonlocal remaining, failed
            while remaining > 0:
                remaining -= 1
                started = time.perf_counter()
                try:
                    response = await client.post(path, json={"a": 1, "b": 2})
                    if response.status_code != 200:
                        failed += 1
                        failures.append(f"{response.status_code}: {response.text[:200]}")
                except httpx.HTTPError as exc:
                    failed += 1
                    failures.append(f"{type(exc).__name__}: {exc}")
                latencies.append(time.perf_counter() - started)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "rps": total / elapsed,
        "p50": latencies[len(latencies) // 2] * 1000,
        "p99": latencies[int(len(latencies) * 0.99)] * 1000,
        "failed": failed,
        "failures": sorted(set(failures))[:5],
    }


WARM_UP = 500  # requests each server answers before the measured runs


def compare(
    modes: list[tuple[str, str, str, str]], runs: int, total: int, clients: int, dsn: str | None = None
) -> list[dict[str, Any]]:
    """Each `(label, server mode, path, key)` warmed up alike, then measured once per run, the order
    alternating run by run."""
    servers = {label: start_server(mode, dsn) for label, mode, _, _ in modes}
    rows: list[dict[str, Any]] = []
    try:
        for label, _, path, key in modes:  # every server warmed alike first (pools, caches, the first writes)
            asyncio.run(hammer(servers[label][1], path, min(WARM_UP, total), clients, key))
        for run in range(1, runs + 1):
            order = modes if run % 2 else list(reversed(modes))
            for label, _, path, key in order:
                proc, url = servers[label]
                cpu = cpu_seconds(proc.pid)
                measured = asyncio.run(hammer(url, path, total, clients, key))
                # CPU the server spent per request (warm-up included): steadier than req/s on a busy machine
                cpu_us = (cpu_seconds(proc.pid) - cpu) / (total + 20) * 1e6
                rows.append({"run": run, "label": label, **measured, "cpu_us": cpu_us})
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
    return rows


def ratio_rows(rows: list[dict[str, Any]], base: str, other: str) -> list[tuple[Any, ...]]:
    """Per run: base and other req/s, other/base req/s, both p50 and their ratio, other's p99, the server CPU
    microseconds per request of both and base/other (the share of stock's speed by CPU), failures."""
    out = []
    for run in sorted({r["run"] for r in rows}):
        a = next(r for r in rows if r["run"] == run and r["label"] == base)
        b = next(r for r in rows if r["run"] == run and r["label"] == other)
        out.append((run, a["rps"], b["rps"], b["rps"] / a["rps"], a["p50"], b["p50"], b["p50"] / a["p50"],
                    b["p99"], a["cpu_us"], b["cpu_us"], a["cpu_us"] / b["cpu_us"], a["failed"] + b["failed"]))  # fmt: skip
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds the process `pid` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def subscriber(url: str, stop: asyncio.Event, seen: list[int]) -> None:
    """An SSE client of `/tools/events` reading until `stop`."""
    import httpx

    async with httpx.AsyncClient(base_url=url, headers={"X-API-Key": OPERATOR_KEY}, timeout=None) as client:
        async with client.stream("GET", "/tools/events") as stream:
            async for line in stream.aiter_lines():
                if line.startswith("data:"):
                    seen[0] += 1
                if stop.is_set():
                    return


async def soak(total: int, clients: int, subscribers: int, dsn: str | None = None) -> dict[str, Any]:
    proc, url = start_server("pg" if dsn else "json", dsn)
    try:
        stop = asyncio.Event()
        seen = [0]
        streams = [asyncio.create_task(subscriber(url, stop, seen)) for _ in range(subscribers)]
        warm = await hammer(url, INVOKE, min(10_000, total // 10), clients, IDE_KEY)
        before = rss_kb(proc.pid)
        measured = await hammer(url, INVOKE, total, clients, IDE_KEY)
        after = rss_kb(proc.pid)
        stop.set()
        await asyncio.sleep(0.5)  # a last frame lets each stream see `stop`
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
    finally:
        proc.terminate()
        proc.wait(10)
    return {**measured, "warm_failed": warm["failed"], "rss_before_mb": before / 1024, "rss_after_mb": after / 1024,
            "growth_mb": (after - before) / 1024, "sse_events_seen": seen[0]}  # fmt: skip


@contextlib.contextmanager
def database(wanted: bool) -> Iterator[str | None]:
    """The DSN of a fresh database on a PostgreSQL server started for this run (fsync on, 127.0.0.1, in a
    temporary folder, as the tests start theirs), stopped and removed at the end; None when not `wanted`."""
    if not wanted:
        yield None
        return
    from tests.echo_tools._pg_support import PgServer

    server = PgServer(fsync=True).start()
    try:
        dsn = server.new_database()
        from echo_tools.pg import PgDatabase

        PgDatabase(dsn).close()  # migrated once here, not raced by the servers
        yield dsn
    finally:
        server.stop()


def headers(base: str, other: str) -> tuple[str, ...]:
    return ("run", f"{base} req/s", f"{other} req/s", f"{other}/{base}", f"{base} p50", f"{other} p50", "p50 x",
            f"{other} p99", f"{base} cpu us", f"{other} cpu us", f"{base}/{other} cpu", "failed")  # fmt: skip


def comparison(runs: int, total: int, clients: int, dsn: str | None) -> None:
    """Stock vs echo-tools with the gate; with `dsn`, also the JSON store vs PostgreSQL (history on both)."""
    gate, json_store, pg = "echo-tools (gate, 3 principals)", "json store", "postgres"
    thread = "echo-tools, thread tool"
    modes = [
        ("stock", "stock", "/add", KEY),
        (gate, "gate", INVOKE, IDE_KEY),
        (thread, "gate-thread", INVOKE, IDE_KEY),
    ]
    if dsn:
        modes += [(json_store, "json", INVOKE, IDE_KEY), (pg, "pg", INVOKE, IDE_KEY)]
    rows = compare(modes, runs, total, clients, dsn)
    for row in rows:
        for failure in row["failures"]:
            print(f"run {row['run']}, {row['label']}: a request failed: {failure}")
    title = f"{clients} concurrent clients, {total} requests per run, uvicorn on 127.0.0.1"
    table = ratio_rows(rows, "stock", gate)
    report(table, title=f"HTTP invoke, {title}", headers=headers("stock", "echo"))
    print(
        f"worst echo/stock req/s: {min(r[3] for r in table):.2f}; worst p50 ratio: {max(r[6] for r in table):.2f}"
    )
    threaded = ratio_rows(rows, "stock", thread)
    print(
        "the same tool on a worker thread (the default for a sync function), echo/stock req/s per run: "
        + ", ".join(f"{r[3]:.2f}" for r in threaded)
        + "; p50 x: "
        + ", ".join(f"{r[6]:.2f}" for r in threaded)
    )
    if not dsn:
        return
    print()
    table = ratio_rows(rows, json_store, pg)
    report(
        table,
        title=f"HTTP invoke with the run history on, JSON catalogue + SQLite vs PostgreSQL, {title}",
        headers=headers("json", "pg"),
    )
    print(
        f"worst pg/json req/s: {min(r[3] for r in table):.2f}; worst p50 ratio: {max(r[6] for r in table):.2f}"
    )
    against_stock = [r[3] for r in ratio_rows(rows, "stock", pg)]
    print("pg/stock req/s per run: " + ", ".join(f"{r:.2f}" for r in against_stock))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--soak", action="store_true", help="the bounded soak instead of the comparison")
    parser.add_argument("--soak-requests", type=int, default=100_000)
    parser.add_argument("--subscribers", type=int, default=3)
    parser.add_argument("--postgres", action="store_true", help="also the stores on PostgreSQL (see above)")
    parser.add_argument("--serve", nargs=2, metavar=("PORT", "MODE"))
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return 0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    with database(args.postgres) as dsn:
        if not args.soak:
            comparison(args.runs, args.requests, args.clients, dsn)
            return 0
        result = asyncio.run(soak(args.soak_requests, args.clients, args.subscribers, dsn))
    print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in result.items()}, indent=2))
    return 0 if result["failed"] == 0 and result["growth_mb"] < 20 else 1


if __name__ == "__main__":
    sys.exit(main())
