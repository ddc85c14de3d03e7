"""The process-wide background loop: run_sync from plain threads, from inside a running loop, timeouts."""

from __future__ import annotations

import asyncio
import threading

import pytest

from echo_tools.runtime import background_loop, run_sync
from tests.echo_tools._executor_support import NUMBERS, local_tool, make_executor


async def _where() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def test_run_sync_runs_the_coroutine_on_the_one_background_loop() -> None:
    assert run_sync(_where()) == "echo-tools-loop"
    assert background_loop() is background_loop() and background_loop().is_running()


def test_run_sync_works_from_many_threads_at_once() -> None:
    results: list[int] = []

    async def square(n: int) -> int:
        await asyncio.sleep(0.001)
        return n * n

    threads = [threading.Thread(target=lambda n=n: results.append(run_sync(square(n)))) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(results) == sorted(n * n for n in range(20))


async def test_run_sync_works_inside_a_running_loop() -> None:
    # a sync framework callback inside an async graph: this thread's loop is running and blocked meanwhile
    assert run_sync(_where()) == "echo-tools-loop"


def test_run_sync_timeout_cancels_the_coroutine() -> None:
    cancelled = threading.Event()

    async def forever() -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError, match="0.05"):
        run_sync(forever(), timeout=0.05)
    assert cancelled.wait(5)


def test_run_sync_on_the_background_loop_itself_refuses_instead_of_deadlocking() -> None:
    async def nested() -> str:
        inner = _where()
        try:
            run_sync(inner)
        except RuntimeError as exc:
            return str(exc)
        return "no error"

    assert "deadlock" in run_sync(nested())


def test_invoke_sync_of_an_async_tool_from_a_worker_thread() -> None:
    executor, _ = make_executor(local_tool("async add", "async_add", input_schema=NUMBERS))
    out: list[float] = []
    thread = threading.Thread(
        target=lambda: out.append(executor.invoke_sync("async add", {"a": 1, "b": 2}).output)
    )
    thread.start()
    thread.join(10)
    assert out == [3]


async def test_http_clients_are_per_loop_and_all_closed_by_aclose() -> None:
    executor, _ = make_executor()
    mine = executor.backend_for("api").client()

    async def other() -> object:
        return executor.backend_for("api").client()

    theirs = run_sync(other())
    assert mine is not theirs and executor.backend_for("api").client() is mine
    await executor.aclose()
    assert mine.is_closed and theirs.is_closed  # type: ignore[attr-defined]


async def test_close_inside_a_running_loop_raises_instead_of_deadlocking() -> None:
    executor, _ = make_executor()
    executor.backend_for("api").client()
    with pytest.raises(RuntimeError, match="await executor.aclose"):
        executor.close()
    await executor.aclose()


async def test_an_awaited_sync_tool_past_its_timeout_returns_while_its_thread_still_runs() -> None:
    from tests.echo_tools.fixture_tools import basic

    basic.FINISHED.clear()
    executor, log = make_executor(local_tool("slow", "slow_sync", timeout_ms=300))
    result = await executor.invoke("slow", {"seconds": 5})
    assert not basic.FINISHED.is_set()  # the await came back at the deadline; the thread is abandoned
    assert result.error_type == "timeout" and "300 ms" in result.error
    assert [e.type for e in log.events] == ["tool.invoked", "tool.timeout"]


async def test_a_worker_wait_with_a_deadline_raises_at_it_and_abandons_the_job() -> None:
    from echo_tools.runtime import WaitTimedOut, WorkerPool

    pool = WorkerPool(max_workers=1)
    release = threading.Event()
    with pytest.raises(WaitTimedOut, match="0.05 s"):
        await pool.run(lambda: release.wait(10), 0.05)
    assert pool.abandoned == 1  # the stuck thread no longer counts against the one worker allowed
    assert await pool.run(lambda: "done", 5) == "done"  # a new worker took its place
    release.set()
