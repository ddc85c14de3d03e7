"""What governance (echo_tools.governance) adds to a call, measured against the same call without it.

    (a) an inline `add(a, b)` through `invoke_sync` and `await invoke`: plain, vs with one guardrail hook
        (a `before` matching a pattern against every string argument) and a per-user quota on the tool
        (in memory; never refused). Goal: <= 1.1x the plain call.
    (b) quota counting in PostgreSQL across two replicas (two executors, each with its own pool, one
        database, calls alternating between them): p50 and p95 added latency per call over the same call
        without a quota.

    (c) `stage` (only when asked): the governance stage of (a) alone, in process (the call object, the
        plan's `before` with the hook and the quota, the `after` check), beside its floor on this machine
        (the hook's own `before` plus the least a sliding log can do: one `time.monotonic()`, one
        uncontended lock, the deque ops) and the plain call: what the stage adds, in ns, when the machine
        is too busy for (a)'s ratio.

Both rows of each pair are measured in this run, interleaved in short rounds, so machine noise hits both
alike; (a) also gives the median of each round's own ratio (governed over the plain round just before it),
the steadiest figure on a shared machine. Medians in microseconds. Run: `.venv/bin/python bench/bench_governance.py [memory] [postgres] [stage]`
(the PostgreSQL part starts a server in a temporary folder; see tests/echo_tools/_pg_support.py).
"""

from __future__ import annotations

import asyncio
import os
import re
import statistics
import sys
import time
import warnings
from pathlib import Path

warnings.simplefilter("ignore")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import ameasure, measure, report  # noqa: E402

from echo_tools import Deny, Quota, ToolContext, ToolExecutor, ToolRegistry  # noqa: E402

N = int(os.environ.get("BENCH_N", "20000"))
ROUNDS = 45  # short rounds: a busy neighbour slows a round of both rows, rarely only one
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}
ARGS = {"a": 1, "b": 2}
USER = ToolContext(user_id="ann")


class Guardrail:
    """A typical guardrail: deny a call whose string arguments match a pattern."""

    name = "no-card-numbers"
    pattern = re.compile(r"\b\d{4}(?:[ -]?\d{4}){3}\b")

    def before(self, call):  # noqa: ANN001, ANN201
        for value in call.args.values():
            if type(value) is str and self.pattern.search(value):
                return Deny("an argument looks like a card number")
        return None


def registry(quota: Quota | None) -> ToolRegistry:
    reg = ToolRegistry(allowed_modules=["_common"])
    reg.register(
        {
            "name": "add",
            "side_effect": "pure",
            "input_schema": SCHEMA,
            "output_schema": {"type": "number"},
            "execution_config": {"module": "_common", "function": "add", "isolation": "inline"},
            "quotas": [quota] if quota is not None else [],
        }
    )
    return reg


def memory_part() -> list[tuple[str, float, float, float, float, float]]:
    plain = ToolExecutor(registry(None))
    # a limit no run of this benchmark reaches: every call is counted, none refused
    governed = ToolExecutor(registry(Quota(limit=10 * N * ROUNDS, per_s=3600, scope="user")))
    governed.add_hook(Guardrail())
    assert plain.invoke_sync("add", ARGS, USER).output == 3
    assert governed.invoke_sync("add", ARGS, USER).output == 3
    refused = governed.invoke_sync("add", {"a": 1, "b": 2, "note": "4111 1111 1111 1111"}, USER)
    assert refused.error_type == "denied", refused  # the hook is live: it runs on every measured call
    rows = []
    sync: dict[str, list[float]] = {"plain": [], "governed": []}
    for _ in range(ROUNDS):  # interleaved rounds: noise from other processes hits both alike
        sync["plain"].append(measure(lambda: plain.invoke_sync("add", ARGS, USER), N // ROUNDS))
        sync["governed"].append(measure(lambda: governed.invoke_sync("add", ARGS, USER), N // ROUNDS))
    rows.append(("invoke_sync, inline add", *_summary(sync)))

    async def async_rows() -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"plain": [], "governed": []}
        for _ in range(ROUNDS):
            times["plain"].append(await ameasure(lambda: plain.invoke("add", ARGS, USER), N // ROUNDS))
            times["governed"].append(await ameasure(lambda: governed.invoke("add", ARGS, USER), N // ROUNDS))
        return times

    rows.append(("await invoke, inline add", *_summary(asyncio.run(async_rows()))))
    plain.close()
    governed.close()
    return rows


def _summary(times: dict[str, list[float]]) -> tuple[float, float, float, float, float]:
    """(plain, governed, ratio of the medians of the rounds, ratio of the quietest rounds, median of the
    rounds' own ratios: each round's governed beside the plain one measured just before it)."""
    p, g = statistics.median(times["plain"]), statistics.median(times["governed"])
    paired = statistics.median(b / a for a, b in zip(times["plain"], times["governed"], strict=True))
    return p, g, g / p, min(times["governed"]) / min(times["plain"]), paired


def postgres_part() -> list[tuple[str, float, float, float]]:
    from echo_tools.governance.pg import PgQuotaCounter
    from echo_tools.pg import PgDatabase
    from tests.echo_tools._pg_support import PgServer

    server = PgServer(fsync=True).start()
    try:
        dsn = server.new_database()
        quota = Quota(limit=10**9, per_s=60, scope="user")
        with PgDatabase(dsn) as first, PgDatabase(dsn) as second:
            replicas = [
                ToolExecutor(registry(quota), quota_counter=PgQuotaCounter(first)),
                ToolExecutor(registry(quota), quota_counter=PgQuotaCounter(second)),
            ]
            plain = ToolExecutor(registry(None))
            n = max(200, N // 20)
            with_quota, without = [], []
            for i in range(n):
                start = time.perf_counter()
                plain.invoke_sync("add", ARGS, USER)
                without.append(time.perf_counter() - start)
                start = time.perf_counter()
                result = replicas[i % 2].invoke_sync("add", ARGS, USER)
                with_quota.append(time.perf_counter() - start)
                assert result.success, result.error
            with first.connection() as conn:
                row = conn.execute("SELECT count(*) FROM echo_quota_hits").fetchone()
            assert row is not None and row[0] == n, row  # every call of both replicas counted, once
            for executor in (*replicas, plain):
                executor.close()
        p50 = (statistics.median(with_quota) - statistics.median(without)) * 1e6
        q = statistics.quantiles(with_quota, n=20)[18] * 1e6
        return [
            ("PostgreSQL quota, 2 replicas: p50 added", statistics.median(without) * 1e6,
             statistics.median(with_quota) * 1e6, p50),
            ("PostgreSQL quota, 2 replicas: p95 with quota", 0.0, q, 0.0),
        ]  # fmt: skip
    finally:
        server.stop()


def stage_part() -> list[tuple[str, float]]:
    """ns per call: the stage alone, its parts, the floor, and the plain call (best of interleaved rounds)."""
    import threading
    import timeit
    from collections import deque

    from echo_tools.governance.hooks import ToolCall

    plain = ToolExecutor(registry(None))
    governed = ToolExecutor(registry(Quota(limit=10 * N * ROUNDS, per_s=3600, scope="user")))
    guardrail = Guardrail()
    governed.add_hook(guardrail)
    tool = governed.registry.resolve("add")
    plan = governed.governance.plan(tool)
    assert tool is not None and plan is not None
    counted = ToolCall(tool, ARGS, USER, 1)
    lock, clock, hits, limit = threading.Lock(), time.monotonic, deque[float](), 10 * N * ROUNDS

    def unchanged(args: dict) -> dict:  # the executor passes its route's bound `checked_input`
        return args

    def stage() -> None:  # what `_call` does for a governed call, beside the plain call's steps
        call = ToolCall(tool, ARGS, USER, 1)
        assert plan.before(call, unchanged, False) is ARGS
        if plan.afters or call.approval_id is not None:
            raise AssertionError("nothing to do after this call")

    def window() -> float:  # the least a sliding log can do: one clock read, one lock, the deque ops
        now = clock()
        lock.acquire()
        try:
            if len(hits) < limit or hits[0] <= now - 3600:
                hits.append(now)
                return 0.0
            return hits[0] + 3600 - now
        finally:
            lock.release()

    def nothing() -> None:
        pass

    def locked() -> None:
        lock.acquire()
        lock.release()

    rows = [
        ("plain invoke_sync", lambda: plain.invoke_sync("add", ARGS, USER)),
        ("governance stage (hook + quota)", stage),
        ("  the call object (ToolCall)", lambda: ToolCall(tool, ARGS, USER, 1)),
        ("  the quota count (plan.count)", lambda: plan.count(counted)),
        ("floor: the hook's own before(call)", lambda: guardrail.before(counted)),
        ("floor: clock + lock + deque ops", window),
        ("floor: one Python function call", nothing),
        ("floor: time.monotonic()", time.monotonic),
        ("floor: uncontended lock", locked),
    ]
    n = max(500, N // 40)
    best = dict.fromkeys([name for name, _ in rows], float("inf"))
    for _ in range(ROUNDS):  # interleaved: noise from other processes hits every row alike
        for name, fn in rows:
            best[name] = min(best[name], timeit.timeit(fn, number=n) / n * 1e9)
    plain.close()
    governed.close()
    found = list(best.items())
    # the floor of the stage: the hook's body and one count, without the function call of each's row
    floor = best[rows[4][0]] + best[rows[5][0]] - best[rows[6][0]]
    return [*found[:2], ("floor of the stage (hook + count)", floor), *found[2:]]


def main() -> None:
    parts = sys.argv[1:] or ["memory", "postgres"]
    if "stage" in parts:
        rows = stage_part()
        plain_ns = rows[0][1]
        report(
            [
                (name, ns, f"{(plain_ns + ns) / plain_ns:.3f}x" if i in (1, 2) else "")
                for i, (name, ns) in enumerate(rows)
            ],
            title="(c) the governance stage alone, in process (best of rounds, ns per call; ratio: plain + stage)",
            headers=["what", "ns", "implied ratio"],
        )
    if "memory" in parts:
        rows = memory_part()
        report(
            [
                (name, p, g, f"{ratio:.2f}x", f"{quiet:.2f}x", f"{paired:.2f}x")
                for name, p, g, ratio, quiet, paired in rows
            ],
            title=f"(a) a hook and a quota vs none, same run (median us, {N} calls in {ROUNDS} interleaved "
            "rounds; goal <= 1.1x)",
            headers=["call", "plain", "hook + quota", "ratio", "quietest rounds", "paired rounds"],
        )
    if "postgres" in parts:
        rows = postgres_part()
        report(
            [(name, plain, quota, added) for name, plain, quota, added in rows],
            title="(b) quota counted in PostgreSQL across two replicas (us per call)",
            headers=["figure", "without quota p50", "with quota", "added p50"],
        )


if __name__ == "__main__":
    main()
