"""Where work runs outside the caller: the background event loop and the worker threads for sync tools.

`run_sync(coro)` runs a coroutine on one long-lived loop in a daemon thread and blocks the calling thread
for its result; it works from any thread, including one whose own loop is running (a sync CrewAI tool
called from inside an async graph). Long-lived async sessions (MCP) live on this loop.

`worker_pool()` is the bounded pool of threads that sync tools run in (`ECHO_TOOLS_MAX_WORKERS`, default
32, or `set_max_workers(n)`). When every worker is busy a new call is refused at once with
`WorkersBusy`, which says how to raise the limit: it never waits in a queue behind calls that may hang.
Python threads cannot be killed, so a call whose caller stopped waiting (its timeout passed) leaves its
thread running to the end; that thread is *abandoned*: it no longer counts against the limit, a new
worker may take its place, and when its job finally returns it ends (or rejoins the pool if there is
room). Abandoned threads are bounded too (`max_abandoned`, default 4 x the limit): past that, calls are
refused until some of the stuck jobs return, so a tool that always hangs cannot grow threads forever.

A hand-off costs one wake-up each way: a worker is woken by a pipe byte written with the GIL let go, and
wakes its caller last thing (a lock released, or a byte on a pipe the caller's event loop reads).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import functools
import math
import os
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_MAX_WORKERS = 32
ENV_MAX_WORKERS = "ECHO_TOOLS_MAX_WORKERS"

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


# -- the background event loop ---------------------------------------------------------------------


def background_loop() -> asyncio.AbstractEventLoop:
    """The process-wide background loop, started on first use in a daemon thread named `echo-tools-loop`."""
    global _loop, _thread
    loop = _loop
    if loop is not None and not loop.is_closed():
        return loop
    with _lock:
        if _loop is None or _loop.is_closed():
            ready = threading.Event()
            new_loop = asyncio.new_event_loop()

            def run() -> None:
                asyncio.set_event_loop(new_loop)
                new_loop.call_soon(ready.set)
                new_loop.run_forever()

            _thread = threading.Thread(target=run, name="echo-tools-loop", daemon=True)
            _thread.start()
            ready.wait()
            _loop = new_loop
        return _loop


def in_background_loop() -> bool:
    """True when the caller is running on the background loop's thread."""
    return _thread is not None and threading.current_thread() is _thread


def run_sync(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run `coro` on the background loop and block this thread until it finishes.

    Args:
        coro: the coroutine to run.
        timeout: seconds to wait; at the deadline the coroutine is cancelled and `TimeoutError` raised.

    Raises:
        RuntimeError: called from the background loop's own thread (it would wait for itself forever).
        TimeoutError: the timeout passed.
    """
    if in_background_loop():
        coro.close()
        raise RuntimeError(
            "run_sync() was called on the echo-tools background loop itself, which would deadlock; "
            "await the coroutine instead"
        )
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError as exc:
        future.cancel()
        raise TimeoutError(f"run_sync: the coroutine did not finish within {timeout} s") from exc
    except BaseException:
        # KeyboardInterrupt in the waiting thread: do not leave the work running unobserved
        future.cancel()
        raise


# -- the worker threads ------------------------------------------------------------------------------


class WorkersBusy(RuntimeError):
    """Every worker thread is busy (or stuck in a call that timed out): the call was not started."""


class WaitTimedOut(TimeoutError):
    """The caller stopped waiting for a job at its deadline (the job, if it started, was abandoned)."""


_QUEUED, _RUNNING, _DONE, _CANCELLED, _ABANDONED = range(5)


class _Job:
    """One job: the worker runs `fn(*args)`, stores its outcome and tells the waiting caller, who waits
    on `done` (a sync caller, blocking) or on `waiter` (a future of the loop whose `_LoopSide` is `side`)."""

    __slots__ = ("args", "done", "error", "fn", "result", "side", "state", "waiter")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.fn: Callable[..., Any] | None = fn
        self.args = args
        self.result: Any = None
        self.error: BaseException | None = None
        self.state = _QUEUED
        self.done: threading.Lock | None = None
        self.side: _LoopSide | None = None
        self.waiter: asyncio.Future[None] | None = None

    def notify(self) -> None:
        if self.done is not None:
            self.done.release()
        else:
            assert self.side is not None
            self.side.wake(self)

    def outcome(self) -> Any:
        if self.error is not None:
            error, self.error = self.error, None  # no cycle through the traceback
            raise error
        return self.result


class WorkerPool:
    """Daemon worker threads for sync tools, started on demand up to `max_workers`; see the module doc.

    Not `ThreadPoolExecutor`: its queue has no bound on waiting (a call would silently wait behind hung
    ones), it joins its threads at exit, and it cannot hand back a thread whose caller gave up.

    Idle workers block reading a pipe, one byte per job: `os.write` lets go of the GIL before it wakes a
    worker, so the worker finds the GIL free and a hand-off costs two thread wake-ups. (A lock released
    with the GIL held wakes a worker that must then wait for the GIL: four wake-ups, twice the time.)
    """

    def __init__(self, max_workers: int = DEFAULT_MAX_WORKERS, max_abandoned: int | None = None) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers!r}")
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned if max_abandoned is not None else 4 * max_workers
        self.abandoned = 0  # threads still running a job whose caller stopped waiting
        self._threads = 0  # threads counted against max_workers: idle or running a job someone awaits
        self._queue: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle: queue.SimpleQueue[None] = queue.SimpleQueue()  # one token per idle worker
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()  # one byte per job queued
        _pools.add(self)

    def call(self, fn: Callable[..., Any], timeout_s: float, *args: Any) -> Any:
        """Run `fn(*args)` on a worker and wait in this thread up to `timeout_s` for its result or exception.

        Raises:
            WorkersBusy: no worker is free; nothing ran.
            WaitTimedOut: the timeout passed first; the job is abandoned (see the module doc).
        """
        job = _Job(fn, args)
        job.done = done = threading.Lock()
        done.acquire()
        self._dispatch(job)
        try:
            finished = done.acquire(timeout=min(timeout_s, threading.TIMEOUT_MAX))
        except BaseException:  # Ctrl-C while waiting: the caller is gone, so is its claim on the thread
            self.abandon(job)
            raise
        if not finished:
            self.abandon(job)
            raise WaitTimedOut(f"the job did not finish within {timeout_s:g} s")
        return job.outcome()

    async def run(self, fn: Callable[..., Any], timeout_s: float | None = None, *args: Any) -> Any:
        """Run `fn(*args)` on a worker and await its result; cancelling the await abandons the job.

        The loop's `_LoopSide` hears of the job's end and keeps its deadline (one timer for every job
        awaited on the loop: cheaper than a timer per call, or `asyncio.timeout` around it).

        Raises:
            WorkersBusy: no worker is free; nothing ran.
            WaitTimedOut: `timeout_s` passed first; the job is abandoned (see the module doc).
        """
        job = _Job(fn, args)
        loop = asyncio.get_running_loop()
        job.side = side = _LoopSide.of(loop)
        job.waiter = waiter = loop.create_future()
        self._dispatch(job)
        if timeout_s is not None:
            side.expire_in(waiter, timeout_s)
        try:
            await waiter
        except BaseException:  # cancelled, or the deadline passed: the caller is gone, so is its claim
            self.abandon(job)
            raise
        finally:
            side.deadlines.pop(waiter, None)
        return job.outcome()

    def abandon(self, job: _Job) -> None:
        """The caller stopped waiting for `job`: never start it, or stop counting its thread."""
        with self._lock:
            if job.state == _QUEUED:
                job.state = _CANCELLED
            elif job.state == _RUNNING:
                job.state = _ABANDONED
                self._threads -= 1
                self.abandoned += 1

    def _dispatch(self, job: _Job) -> None:
        try:
            self._idle.get_nowait()  # an idle worker will take it
        except queue.Empty:
            with self._lock:
                try:
                    self._idle.get_nowait()  # a worker became idle meanwhile (tokens are put under the lock)
                    name = ""
                except queue.Empty:
                    if self._threads >= self.max_workers or self.abandoned >= self.max_abandoned:
                        raise WorkersBusy(self._busy_message()) from None
                    self._threads += 1
                    name = f"echo-tools-worker-{self._threads + self.abandoned}"
            if name:
                threading.Thread(target=self._work, name=name, daemon=True).start()
        self._queue.put(job)
        os.write(self._wake_w, b"\0")  # after the job is queued: a worker reading the byte finds it

    def _busy_message(self) -> str:
        stuck = f", {self.abandoned} more stuck in calls that timed out" if self.abandoned else ""
        return (
            f"all {self.max_workers} worker threads for sync tools are busy{stuck}; the call was not "
            f"started. Try again later, or raise the limit: {ENV_MAX_WORKERS}={2 * self.max_workers} "
            f"or echo_tools.runtime.set_max_workers({2 * self.max_workers})"
        )

    def _work(self) -> None:
        wake, jobs, lock = self._wake_r, self._queue, self._lock
        while True:
            os.read(wake, 1)
            job = jobs.get_nowait()
            with lock:
                start = job.state == _QUEUED
                if start:
                    job.state = _RUNNING
            if not start:
                self._idle.put(None)  # a job cancelled before it started: still idle
                continue
            fn, job.fn = job.fn, None
            try:
                job.result = fn(*job.args) if fn is not None else None
            except BaseException as exc:  # boundary: the job's outcome, whatever it is, goes to its caller
                job.error = exc
            job.args = ()
            with lock:
                abandoned = job.state == _ABANDONED
                if abandoned:
                    self.abandoned -= 1
                    if self._threads >= self.max_workers:
                        return  # others took this thread's place meanwhile: it ends here
                    self._threads += 1  # room again: it rejoins the pool
                else:
                    job.state = _DONE
                # idle before the caller hears back, so its next call finds this worker free
                self._idle.put(None)
            if not abandoned:
                # the last thing before blocking again: the caller wakes to a GIL this thread lets go of
                job.notify()
            del job  # do not keep the last result alive while idle

    def _reset_after_fork(self) -> None:
        # a forked child has none of its parent's worker threads, and must not share its parent's pipe
        os.close(self._wake_r)
        os.close(self._wake_w)
        self.__init__(self.max_workers, self.max_abandoned)  # type: ignore[misc]


_pools: weakref.WeakSet[WorkerPool] = weakref.WeakSet()


def _reset_pools_after_fork() -> None:
    for pool in list(_pools):
        pool._reset_after_fork()


os.register_at_fork(after_in_child=_reset_pools_after_fork)


def _close_pipe(read_end: int, write_end: int) -> None:
    os.close(read_end)
    os.close(write_end)


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _expire(waiter: asyncio.Future[None], timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(WaitTimedOut(f"the job did not finish within {timeout_s:g} s"))


class _LoopSide:
    """What the workers share with one event loop: the pipe they wake it through when a job awaited on it
    ends, and the deadlines of those jobs, kept by a single timer armed for the earliest.

    A reader on the pipe (`loop.add_reader`) settles the finished jobs: a byte written with the GIL let go
    costs the loop one wake-up, about half of what `call_soon_threadsafe` costs. A loop without readers
    (Windows' proactor) is woken with `call_soon_threadsafe`. Most jobs end long before their deadline:
    each then costs a dict entry, not a timer handle made, pushed on the loop's heap and cancelled.
    """

    _local = threading.local()  # the side of the loop this thread ran last
    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopSide] = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)  # a closed loop is not kept alive by its thread
        self.finished: collections.deque[_Job] = collections.deque()
        self.deadlines: dict[asyncio.Future[None], tuple[float, float]] = {}  # waiter: (when, timeout_s)
        self.armed = math.inf  # when the timer fires; inf: no timer
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        try:
            loop.add_reader(self._wake_r, self._settle_finished)
        except NotImplementedError:
            _close_pipe(self._wake_r, self._wake_w)
            self._wake_r = self._wake_w = -1
        else:  # the pipe lives as long as the loop (a job awaited on it holds the loop through its future)
            weakref.finalize(loop, _close_pipe, self._wake_r, self._wake_w)

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _LoopSide:
        """The side of `loop`, the running loop of this thread."""
        side: _LoopSide | None = getattr(cls._local, "side", None)
        if side is None or side.loop() is not loop:  # a thread that runs loops in turn: one side each
            with cls._lock:
                side = cls._by_loop.get(loop)
                if side is None:
                    side = cls._by_loop[loop] = cls(loop)
            cls._local.side = side
        return side

    def wake(self, job: _Job) -> None:
        """Called by the worker that ran `job`, as the last thing it does for it."""
        if self._wake_w < 0:
            loop = self.loop()
            if loop is not None and job.waiter is not None:
                loop.call_soon_threadsafe(_settle, job.waiter)
            return
        self.finished.append(job)  # before the byte: the reader that reads it finds the job
        os.write(self._wake_w, b"\0")

    def _settle_finished(self) -> None:
        try:
            os.read(self._wake_r, 4096)
        except BlockingIOError:  # a byte read with a job taken by an earlier round
            pass
        while self.finished:
            waiter = self.finished.popleft().waiter
            if waiter is not None:
                _settle(waiter)

    def expire_in(self, waiter: asyncio.Future[None], timeout_s: float) -> None:
        """Fail `waiter` with `WaitTimedOut` in `timeout_s` unless it is settled (or dropped) first."""
        loop = waiter.get_loop()
        when = loop.time() + timeout_s
        self.deadlines[waiter] = (when, timeout_s)
        if when < self.armed:
            self._arm(loop, when)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        # the timer handle stays the loop's (held here, it would keep a finished loop alive); one overtaken
        # by an earlier deadline fires to no effect
        self.armed = when
        loop.call_at(when, self._fire, when)

    def _fire(self, armed_for: float) -> None:
        loop = self.loop()
        if armed_for != self.armed or loop is None:
            return
        self.armed = math.inf
        now = loop.time()
        due = [(waiter, timeout_s) for waiter, (when, timeout_s) in self.deadlines.items() if when <= now]
        for waiter, timeout_s in due:
            del self.deadlines[waiter]
            _expire(waiter, timeout_s)
        if self.deadlines:
            self._arm(loop, min(when for when, _ in self.deadlines.values()))


_pool: WorkerPool | None = None
_pool_lock = threading.Lock()


def _configured_size() -> int:
    text = os.environ.get(ENV_MAX_WORKERS, "")
    try:
        size = int(text) if text else DEFAULT_MAX_WORKERS
    except ValueError:
        raise ValueError(f"{ENV_MAX_WORKERS} must be a positive integer, got {text!r}") from None
    if size < 1:
        raise ValueError(f"{ENV_MAX_WORKERS} must be a positive integer, got {text!r}")
    return size


def worker_pool() -> WorkerPool:
    """The process-wide pool that sync tools of every backend run in."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = WorkerPool(_configured_size())
    return _pool


def set_max_workers(max_workers: int) -> None:
    """Change how many sync tool calls may run at once in this process (threads already running stay)."""
    if not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 1:
        raise ValueError(f"max_workers must be a positive integer, got {max_workers!r}")
    pool = worker_pool()
    with pool._lock:
        pool.max_workers = max_workers
        pool.max_abandoned = 4 * max_workers


async def run_in_worker(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` on a worker thread, with the caller's context variables.

    If the awaiting task is cancelled (a timeout), the call keeps running to its end on its thread and
    its result is dropped: Python threads cannot be killed. Use `isolation: "process"` for work that must stop.

    Raises:
        WorkersBusy: every worker is busy; nothing ran.
    """
    ctx = contextvars.copy_context()
    return await worker_pool().run(functools.partial(ctx.run, fn, *args, **kwargs))


def await_in_worker(fn: Callable[..., Any], timeout_s: float, *args: Any) -> Coroutine[Any, Any, Any]:
    """`await` twin of `call_in_worker`: `fn(*args)` on a worker thread, awaited up to `timeout_s`.

    Returns the awaitable (no coroutine of its own around the pool's).

    Raises:
        WorkersBusy: every worker is busy; nothing ran.
        WaitTimedOut: the timeout passed (the thread is abandoned, the result dropped).
    """
    return worker_pool().run(contextvars.copy_context().run, timeout_s, fn, *args)


def call_in_worker(fn: Callable[..., Any], timeout_s: float, *args: Any) -> Any:
    """`fn(*args)` on a worker thread, with the caller's context variables, waited for up to `timeout_s`.

    Raises:
        WorkersBusy: every worker is busy; nothing ran.
        WaitTimedOut: the timeout passed (the thread is abandoned, the result dropped).
    """
    return worker_pool().call(contextvars.copy_context().run, timeout_s, fn, *args)
