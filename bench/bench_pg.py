"""PostgreSQL store figures, on a real server started here (fsync on) in a temporary folder.

    (a) a catalogue change on one replica visible in another replica's registry (ms)   goal < 1,000, moonshot < 100
    (b) history query by run id over 100,000 events (ms)                               goal < 50
    (c) write and read throughput of PgToolStorage vs ToolStorage (ratio)
    (d) invoke throughput through the API, catalogue and history in PostgreSQL vs JSON + SQLite (ratio,
        goal >= 0.8): the calculator through `POST /tools/invoke/id/...`, in-process over ASGI, 8 at a time,
        timed until every call's events are written to the history

Replicas are two `PgToolStorage` objects, each with its own pool and LISTEN connection (what two
processes would hold); the second registry reloads on NOTIFY. Medians and 95th percentiles of many runs.
Run: `.venv/bin/python bench/bench_pg.py [PART ...]` (about a minute; parts: change_visibility,
history_query, throughput, api_throughput). Needs the server binaries (see
tests/echo_tools/_pg_support.py).
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from echo_tools import ToolDef, ToolRegistry  # noqa: E402
from echo_tools.events import ToolEvent  # noqa: E402
from echo_tools.pg import PgDatabase, PgRunHistory, PgToolStorage  # noqa: E402
from echo_tools.storage import ToolStorage  # noqa: E402
from tests.echo_tools._pg_support import PgServer, tool_dict  # noqa: E402

EVENTS = 100_000
RUNS = 1_000
TOOLS = 300


def _ms(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[int(len(values) * 0.95) - 1]
    return f"median {statistics.median(values) * 1000:7.2f} ms   p95 {p95 * 1000:7.2f} ms   (n={len(values)})"


def change_visibility(dsn: str, rounds: int = 60) -> None:
    writer_store, reader_store = PgToolStorage(dsn), PgToolStorage(dsn)
    writer = ToolRegistry(storage=writer_store, allowed_modules=["math"])  # type: ignore[arg-type]
    reader = ToolRegistry(storage=reader_store, allowed_modules=["math"])  # type: ignore[arg-type]
    seen = threading.Event()
    reader_store.subscribe(reader.reload)
    reader_store.subscribe(seen.set)
    after_commit, end_to_end = [], []
    for i in range(rounds):
        seen.clear()
        start = time.perf_counter()
        writer.register(tool_dict(f"vis_{i}", f"Visible {i}"))
        committed = time.perf_counter()
        if not seen.wait(5):
            raise SystemExit(f"round {i}: the other replica did not hear the change within 5 s")
        while reader.get(f"vis_{i}") is None:  # the reload runs right after the flag is set
            time.sleep(0.0001)
        done = time.perf_counter()
        after_commit.append(done - committed)
        end_to_end.append(done - start)
    print(f"(a) change visible on the other replica, after the write returned: {_ms(after_commit)}")
    print(f"    register on one replica until visible on the other:           {_ms(end_to_end)}")
    writer_store.close()
    reader_store.close()


def history_query(dsn: str, rounds: int = 300) -> None:
    history = PgRunHistory(dsn)
    with history.db.connection() as conn, conn.cursor() as cur:
        with cur.copy(
            "COPY echo_events (event_id, type, timestamp, run_id, workflow_id, agent_id, tool_id, body) FROM STDIN"
        ) as copy:
            for i in range(EVENTS):
                event = ToolEvent(
                    type=random.choice(("tool.invoked", "tool.completed")),
                    run_id=f"run_{i % RUNS}",
                    workflow_id="wf",
                    agent_id=f"agent_{i % 7}",
                    tool_id=f"tool_{i % 50}",
                    input={"text": "x" * 80},
                )
                copy.write_row(
                    (
                        event.event_id,
                        event.type,
                        event.timestamp,
                        event.run_id,
                        event.workflow_id,
                        event.agent_id,
                        event.tool_id,
                        event.to_json(),
                    )
                )
        conn.execute("ANALYZE echo_events")
    assert history.count() == EVENTS
    times = []
    for _ in range(rounds):
        run_id = f"run_{random.randrange(RUNS)}"
        start = time.perf_counter()
        found = history.events(run_id=run_id, limit=1000)
        times.append(time.perf_counter() - start)
        assert len(found) == EVENTS // RUNS
    print(f"(b) events(run_id=...) over {EVENTS:,} events, {EVENTS // RUNS} per run, parsed: {_ms(times)}")
    history.close()


def throughput(dsn: str) -> None:
    tools = [ToolDef.model_validate(tool_dict(f"tp_{i}", f"Throughput {i}")) for i in range(TOOLS)]
    with tempfile.TemporaryDirectory() as folder:
        stores = {"json": ToolStorage(folder), "pg": PgToolStorage(dsn, listen=False)}
        rates: dict[str, dict[str, float]] = {}
        for kind, store in stores.items():
            start = time.perf_counter()
            for tool in tools:
                store.save(tool)  # type: ignore[attr-defined]
            writes = TOOLS / (time.perf_counter() - start)
            start = time.perf_counter()
            for tool in tools:
                store.load(tool.tool_id)  # type: ignore[attr-defined]
            reads = TOOLS / (time.perf_counter() - start)
            start = time.perf_counter()
            for _ in range(10):
                assert len(store.load_all()[0]) == TOOLS  # type: ignore[attr-defined]
            full = 10 / (time.perf_counter() - start)
            rates[kind] = {"save": writes, "load": reads, "load_all": full}
        stores["pg"].close()  # type: ignore[attr-defined]
    print(f"(c) throughput with {TOOLS} tools (operations per second; ratio = PostgreSQL / JSON):")
    for op in ("save", "load", "load_all"):
        j, p = rates["json"][op], rates["pg"][op]
        print(f"    {op:9s} json {j:9.1f}/s   postgres {p:9.1f}/s   ratio {p / j:5.2f}")


def api_throughput(dsn: str, calls: int = 400, concurrency: int = 8, rounds: int = 5) -> None:
    import asyncio

    import httpx

    from echo_tools import ToolExecutor
    from echo_tools.api import create_app
    from echo_tools.history import RunHistory
    from echo_tools.pg import attach, open_stores

    async def drive(app: object, settle: Callable[[], object]) -> float:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:

            async def one(i: int) -> None:
                answer = await client.post(
                    "/tools/invoke/id/tool_calculator",
                    params={"run_id": f"bench-{i % 20}"},
                    json={"operation": "add", "values": [i, 1]},
                )
                assert answer.status_code == 200 and answer.json()["success"], answer.text

            await asyncio.gather(*(one(i) for i in range(concurrency)))  # warm up
            start = time.perf_counter()
            for first in range(0, calls, concurrency):
                await asyncio.gather(*(one(i) for i in range(first, first + concurrency)))
            await asyncio.to_thread(settle)  # every call's events written to the history, in the time
            return calls / (time.perf_counter() - start)

    def settled(executor: ToolExecutor, history: RunHistory | PgRunHistory) -> Callable[[], object]:
        return lambda: (executor.events.flush(), history.flush())

    samples: dict[str, list[float]] = {"json": [], "pg": [], "pg_durable": []}
    with tempfile.TemporaryDirectory() as folder:
        registry = ToolRegistry(storage_dir=folder)
        registry.discover_local_tools([ROOT / "AgentTools"])
        history = RunHistory(folder)
        stores = open_stores(dsn)
        pg_registry = ToolRegistry(storage=stores.storage)  # type: ignore[arg-type]
        attach(pg_registry, stores)
        for tool in registry.list_all():
            pg_registry.register(tool)
        durable = PgRunHistory(stores.db, durable_events=True)
        setups = {
            "json": (registry, history),
            "pg": (pg_registry, stores.history),
            "pg_durable": (pg_registry, durable),
        }
        for _ in range(rounds):  # the three take turns, so a busy moment of the machine hits each alike
            for kind, (reg, kept) in setups.items():
                executor = ToolExecutor(reg, event_sinks=[kept])
                samples[kind].append(asyncio.run(drive(create_app(reg, executor), settled(executor, kept))))
                executor.close()
        history.close()
        durable.close()
        stores.close()
    rates = {kind: statistics.median(values) for kind, values in samples.items()}
    print(
        f"(d) invoke through the API ({calls} calls, {concurrency} at a time, events kept in the history;"
        f" medians of {rounds} turns):"
    )
    print(
        f"    json + sqlite {rates['json']:8.1f}/s   postgres {rates['pg']:8.1f}/s   ratio {rates['pg'] / rates['json']:5.2f}"
    )
    print(
        f"    postgres with durable_events=True (each batch of events waits for the disk): "
        f"{rates['pg_durable']:8.1f}/s   ratio {rates['pg_durable'] / rates['json']:5.2f}"
    )


def main() -> None:
    server = PgServer(fsync=True).start()
    try:
        parts = (change_visibility, history_query, throughput, api_throughput)
        chosen = [p for p in parts if not sys.argv[1:] or p.__name__ in sys.argv[1:]]
        for part in chosen:
            dsn = server.new_database()
            PgDatabase(dsn).close()
            part(dsn)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
