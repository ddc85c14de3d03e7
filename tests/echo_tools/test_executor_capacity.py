"""Calls under load: a bounded worker pool that answers when full, and sinks that never stall the loop."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
from collections.abc import Iterator

import pytest

from echo_tools import ToolContext
from echo_tools.events import EventBus, MemoryEventLog, ToolEvent
from echo_tools.runtime import WaitTimedOut, WorkerPool, WorkersBusy, worker_pool
from tests.echo_tools._executor_support import NUMBERS, local_tool, make_executor
from tests.echo_tools.fixture_tools import basic

ADD = local_tool("add", "add", input_schema=NUMBERS)
HELD = local_tool("held", "held")


@pytest.fixture
def hold() -> Iterator[None]:
    basic.HOLD.clear()
    basic.ALL_HELD.clear()
    basic.HELD.clear()
    yield
    basic.HOLD.set()  # whatever happened, no thread stays held


def _wait_until(predicate: object, limit: int = 1000) -> bool:
    """A bounded wait for a condition that other threads make true."""
    tick = threading.Event()
    for _ in range(limit):
        if predicate():  # type: ignore[operator]
            return True
        tick.wait(0.01)
    return False


# -- the pool ------------------------------------------------------------------------------------------


def test_a_full_pool_refuses_at_once_naming_its_size_and_how_to_raise_it() -> None:
    pool = WorkerPool(max_workers=2)
    release, running = threading.Event(), threading.Semaphore(0)

    def hang() -> str:
        running.release()
        release.wait(30)
        return "done"

    waiters = [threading.Thread(target=pool.call, args=(hang, 30)) for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    assert running.acquire(timeout=10) and running.acquire(timeout=10)
    with pytest.raises(WorkersBusy) as refused:
        pool.call(lambda: "never", 30)
    message = str(refused.value)
    assert "all 2 worker threads" in message and "not started" in message
    assert "ECHO_TOOLS_MAX_WORKERS=4" in message and "set_max_workers(4)" in message
    release.set()
    for waiter in waiters:
        waiter.join(10)
    assert pool.call(lambda: "again", 10) == "again"


async def test_a_job_its_caller_gave_up_on_is_abandoned_and_a_new_worker_takes_its_place() -> None:
    pool = WorkerPool(max_workers=1, max_abandoned=1)
    release, started = threading.Event(), threading.Event()

    def stuck() -> str:
        started.set()
        release.wait(30)
        return "late"

    task = asyncio.create_task(pool.run(stuck))
    assert await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert pool.abandoned == 1
    # the stuck thread no longer counts against max_workers, but stuck threads are bounded too
    with pytest.raises(WorkersBusy, match="1 more stuck in calls that timed out"):
        await pool.run(lambda: "refused")
    release.set()
    assert await asyncio.to_thread(_wait_until, lambda: pool.abandoned == 0)
    assert await pool.run(lambda: "next") == "next"
    assert pool.call(lambda: "and again", 10) == "and again"


def test_a_sync_wait_that_times_out_leaves_the_job_to_finish_unobserved() -> None:
    pool = WorkerPool(max_workers=2)
    release = threading.Event()
    with pytest.raises(WaitTimedOut):
        pool.call(lambda: release.wait(30), 0.01)
    assert pool.call(lambda: "free worker", 10) == "free worker"
    release.set()


async def test_a_pool_of_one_serves_call_after_call_without_refusing() -> None:
    pool = WorkerPool(max_workers=1)
    assert [pool.call(lambda n=n: n, 10) for n in range(200)] == list(range(200))
    assert [await pool.run(lambda n=n: n) for n in range(200)] == list(range(200))


async def test_awaited_jobs_on_one_loop_each_time_out_at_their_own_deadline() -> None:
    # one timer keeps every deadline of the loop: a short wait added after a long one must not wait for it,
    # and the long one must still expire after the short one fired
    pool = WorkerPool(max_workers=3)
    release = threading.Event()
    long_wait = asyncio.create_task(pool.run(lambda: release.wait(30), 0.4))
    quick = asyncio.create_task(pool.run(lambda: "quick", 30))
    short_wait = asyncio.create_task(pool.run(lambda: release.wait(30), 0.05))
    with pytest.raises(WaitTimedOut, match="0.05 s"):
        await short_wait
    assert not long_wait.done() and await quick == "quick"
    with pytest.raises(WaitTimedOut, match="0.4 s"):
        await long_wait
    assert pool.abandoned == 2
    release.set()
    assert await asyncio.to_thread(_wait_until, lambda: pool.abandoned == 0)


def test_loops_that_come_and_go_leave_no_wake_pipes_open() -> None:
    pool = WorkerPool(max_workers=1)
    asyncio.run(pool.run(lambda: "first", 10))  # the pool's own pipe exists from here on
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for n in range(20):
        assert asyncio.run(pool.run(lambda n=n: n, 10)) == n
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) <= before


def test_a_thread_running_two_loops_in_turn_keeps_one_wake_pipe_per_loop() -> None:
    pool = WorkerPool(max_workers=1)
    loops = [asyncio.new_event_loop(), asyncio.new_event_loop()]
    try:
        for loop in loops:
            assert loop.run_until_complete(pool.run(lambda: "first", 10)) == "first"
        before = len(os.listdir("/proc/self/fd"))
        for n in range(10):
            assert loops[n % 2].run_until_complete(pool.run(lambda n=n: n, 10)) == n
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        for loop in loops:
            loop.close()


def test_a_loop_without_readers_is_woken_with_call_soon_threadsafe() -> None:
    class NoReaders(asyncio.SelectorEventLoop):  # as Windows' proactor loop: no add_reader
        def add_reader(self, *args: object) -> None:
            raise NotImplementedError

    pool = WorkerPool(max_workers=1)
    with asyncio.Runner(loop_factory=NoReaders) as runner:
        assert runner.run(pool.run(lambda: "woken", 10)) == "woken"
        with pytest.raises(WaitTimedOut):
            runner.run(pool.run(lambda: threading.Event().wait(0.5), 0.05))


def test_a_forked_child_starts_its_own_workers_and_leaves_its_parents_alone() -> None:
    pool = WorkerPool(max_workers=1)
    assert pool.call(lambda: "parent", 10) == "parent"  # the parent's one worker is idle, reading the pipe
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: no worker threads of its own until it asks
        try:
            os.write(write_end, pool.call(lambda: "child", 10).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        assert os.read(read_end, 16) == b"child"
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    assert pool.call(lambda: "parent again", 10) == "parent again"


def test_the_pool_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_workers must be at least 1, got 0"):
        WorkerPool(max_workers=0)


# -- the executor under load ----------------------------------------------------------------------------


async def test_hung_sync_calls_that_time_out_do_not_block_later_thread_tools(hold: None) -> None:
    executor, _ = make_executor(ADD, HELD)
    size = worker_pool().max_workers
    short = ToolContext(timeout_ms=50)
    hung = await asyncio.gather(
        *(executor.invoke("held", {"key": "timeout", "until": size}, short) for _ in range(size))
    )
    assert {r.error_type for r in hung} == {"timeout"}
    # every one of them still holds its thread; later calls run all the same
    results = await asyncio.gather(*(executor.invoke("add", {"a": i, "b": 1}) for i in range(size)))
    assert [r.output for r in results] == [i + 1 for i in range(size)]
    assert (await asyncio.to_thread(executor.invoke_sync, "add", {"a": 1, "b": 1})).output == 2


async def test_a_call_finding_every_worker_busy_fails_at_once_naming_the_pool_size(hold: None) -> None:
    executor, log = make_executor(ADD, HELD)
    basic.HOLD.set()  # one call first, so the tools are loaded before the pool fills up
    assert (await executor.invoke("held", {"key": "warm", "until": 1})).success
    assert (await executor.invoke("add", {"a": 0, "b": 0})).success
    basic.HOLD.clear()
    size = worker_pool().max_workers
    holders = [
        asyncio.create_task(executor.invoke("held", {"key": "full", "until": size})) for _ in range(size)
    ]
    assert await asyncio.to_thread(basic.ALL_HELD.wait, 30)
    refused = await executor.invoke("add", {"a": 1, "b": 2})
    assert not refused.success and refused.error_type == "execution"
    assert f"all {size} worker threads" in refused.error and "ECHO_TOOLS_MAX_WORKERS" in refused.error
    assert log.events[-1].type == "tool.failed" and log.events[-1].tool_id == "tool_add"
    basic.HOLD.set()
    assert {r.output for r in await asyncio.gather(*holders)} == {"released"}
    assert (await executor.invoke("add", {"a": 1, "b": 2})).output == 3


# -- sinks ---------------------------------------------------------------------------------------------


async def test_a_slow_sink_never_stalls_the_event_loop() -> None:
    gate = threading.Event()
    seen: list[tuple[str, bool]] = []

    def slow_sink(event: ToolEvent) -> None:
        gate.wait(10)  # stands for a sink stuck on a slow disk or network
        seen.append((event.type, gate.is_set()))

    executor, log = make_executor(ADD)
    executor.add_sink(slow_sink)
    result = await executor.invoke("add", {"a": 1, "b": 2})
    assert result.success and [e.type for e in log.events] == ["tool.invoked", "tool.completed"]
    gate.set()  # only now: a sink called on the loop would have waited out its 10 s before this line
    assert await asyncio.to_thread(executor.events.flush, 10)
    assert seen == [("tool.invoked", True), ("tool.completed", True)]


def test_a_full_event_queue_drops_events_and_counts_them_without_blocking_the_caller() -> None:
    gate = threading.Event()
    got: list[str] = []
    memory = MemoryEventLog()
    bus = EventBus([memory, lambda event: (gate.wait(10), got.append(event.type))], queue_size=2)
    for number in range(6):
        bus.emit(ToolEvent(type=f"event-{number}"), on_loop=True)
    assert len(memory.events) == 6  # the in-memory log is inline: it saw every event
    assert bus.dropped >= 3  # one being delivered, two queued, the rest dropped and counted
    gate.set()
    assert bus.flush(10)
    assert got[0] == "event-0" and got == sorted(got) and len(got) == 6 - bus.dropped  # in order, none twice


def test_events_emitted_outside_a_loop_reach_every_sink_before_the_call_returns(tmp_path) -> None:  # noqa: ANN001
    seen: list[str] = []
    executor, _ = make_executor(ADD)
    executor.add_sink(lambda event: seen.append(event.type))
    executor.invoke_sync("add", {"a": 1, "b": 2})
    assert seen == ["tool.invoked", "tool.completed"]
