"""The run viewer (`/ui/`) on a big history: 10,000 recorded runs (3 calls each) and one run of 1,000 calls.

    query    the history query behind each view, in this process (`history.browser`): a page of runs
             (unfiltered, by status, by agent) and one run's record and events
    paint    from navigation to the first paint of the data (the frame that shows it), measured by the
             page itself (`performance.mark`) in a real headless Chromium (Debian's `chromium` and
             `chromium-driver` under selenium) against `create_app` served by uvicorn on 127.0.0.1

Targets (medians): every query under 50 ms, every paint under 1 s. Medians of ROUNDS (default 5; queries
4 x ROUNDS), the slowest in brackets.
Run: `.venv/bin/python bench/bench_viewer.py [ROUNDS]` (prints a skip line without Chromium).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from echo_tools import ToolExecutor, ToolRegistry  # noqa: E402
from echo_tools.api import create_app  # noqa: E402
from echo_tools.events import ToolEvent  # noqa: E402
from echo_tools.history import RunHistory  # noqa: E402
from echo_tools.settings import ApiSettings  # noqa: E402
from tests.echo_tools._api_support import serve_in_thread  # noqa: E402
from tests.echo_tools._browser_support import ChromiumMissing, chromium, paint_ms, wait_for  # noqa: E402

RUNS = 10_000
CALLS_PER_RUN = 3
BIG_CALLS = 1_000
STATUSES = ("completed", "completed", "completed", "failed", "interrupted")


def fill(history: RunHistory) -> None:
    """10,000 runs of 3 calls by 3 agents, then one run of 1,000 calls (every 10th nested in the one before)."""
    for number in range(RUNS):
        run_id = f"run_{number:05d}"
        history.start_run(run_id, {"source": {}}, f"wf_{number % 7}")
        for call in range(CALLS_PER_RUN):
            record_call(history, run_id, f"{run_id}_{call}", f"agent_{call}", f"Agent {call}")
        history.set_status(run_id, STATUSES[number % len(STATUSES)])
    history.start_run("run_big", {"source": {}}, "wf_big")
    for call in range(BIG_CALLS):
        parent = f"big_{call - 1}" if call % 10 else None
        record_call(history, "run_big", f"big_{call}", f"agent_{call % 4}", f"Agent {call % 4}", parent)
    history.set_status("run_big", "completed")
    history.flush()


def record_call(
    history: RunHistory, run_id: str, call_id: str, agent_id: str, agent_name: str, parent: str | None = None
) -> None:
    fields = {
        "tool_id": "tool_calculator",
        "tool_name": "Calculator",
        "tool_type": "local",
        "run_id": run_id,
        "agent_id": agent_id,
        "agent_name": agent_name,
        "call_id": call_id,
        "parent_call_id": parent,
    }
    history.record(ToolEvent("tool.invoked", input={"operation": "add", "values": [2, 3]}, **fields))
    history.record(
        ToolEvent("tool.completed", output={"operation": "add", "result": 5}, duration_ms=1.5, **fields)
    )


def timed_ms(fn: object, rounds: int) -> list[float]:
    samples = []
    for _ in range(rounds + 1):  # the first round warms caches and is not counted
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append((time.perf_counter() - start) * 1000)
    return samples[1:]


def line(name: str, samples: list[float], target: float) -> str:
    median = statistics.median(samples)
    verdict = "ok" if median < target else "OVER"
    return f"  {name:<34} {median:9.1f} ms  [max {max(samples):7.1f}]  target < {target:.0f} ms  {verdict}"


def paints(url: str, rounds: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"runs list (10,000 runs)": [], "run of 1,000 calls": []}
    with chromium() as driver:
        driver.set_page_load_timeout(120)  # a machine busy with other work can be slow to start a renderer
        for _ in range(rounds + 1):
            for name, fragment, view in (
                ("runs list (10,000 runs)", "#/", "runs"),
                ("run of 1,000 calls", "#/run/run_big", "run"),
            ):
                driver.get("about:blank")
                driver.get(f"{url}/ui/{fragment}")
                wait_for(
                    driver,
                    lambda d, v=view: d.execute_script("return document.body.dataset.painted") == v,
                    view,
                )
                found[name].append(paint_ms(driver, view))
            wait_for(
                driver, lambda d: d.find_elements("css selector", "#timeline[data-complete]"), "every call"
            )
            if len(driver.find_elements("css selector", "#timeline details.call")) != BIG_CALLS:
                raise AssertionError("the big run's timeline does not show its 1,000 calls")
    return {name: samples[1:] for name, samples in found.items()}


def main(rounds: int = 5) -> int:
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        history = RunHistory(folder)
        fill(history)
        print(f"history: {RUNS:,} runs of {CALLS_PER_RUN} calls and one of {BIG_CALLS:,} calls, "
              f"{history.count():,} events (filled in {time.perf_counter() - started:.0f} s)")  # fmt: skip
        browser = history.browser
        print("query (in process)")
        for name, fn in (
            ("runs page (50 newest)", lambda: browser.run_page()),
            ("runs page, status=failed", lambda: browser.run_page(status="failed")),
            ("runs page, agent_id=agent_1", lambda: browser.run_page(agent_id="agent_1")),
            ("runs page, agent nobody has", lambda: browser.run_page(agent_id="agent_none")),
            (
                "run of 1,000 calls (record+events)",
                lambda: (browser.run_record("run_big"), browser.run_events_json("run_big")),
            ),  # fmt: skip
        ):
            print(line(name, timed_ms(fn, rounds * 4), 50))
        registry = ToolRegistry(storage_dir=folder)
        executor = ToolExecutor(registry)
        app = create_app(registry, executor, ApiSettings(), history=history)
        try:
            with serve_in_thread(app) as url:
                print("first paint of the data (headless Chromium)")
                for name, samples in paints(url, rounds).items():
                    print(line(name, samples, 1000))
        except ChromiumMissing as exc:
            print(f"paint: skipped: {exc}")
        finally:
            executor.close()
            history.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 5))
