"""Where work runs outside the caller: the background event loop and the worker threads of sync tools.

`run_sync(coro)` runs a coroutine on one long-lived loop in a daemon thread and blocks the calling thread
for its result; it works from any thread, including one whose own loop is running (a sync CrewAI tool
called from inside an async graph). Long-lived async sessions (MCP) live on this loop.

Sync tools run on daemon worker threads, at most `ECHO_TOOLS_MAX_WORKERS` calls at once (default 32, or
`set_max_workers(n)`): an anyio `CapacityLimiter` holds the tokens and refuses at once when none is left
(`WorkersBusy`, saying how to raise the limit), so a call never waits in a queue behind calls that may
hang. An awaiting caller waits on a future with a timer, a blocking one on a lock with a timeout.
Python threads cannot be killed: a call whose caller stopped waiting leaves its thread running to the end,
*abandoned*. Its token goes back at once; abandoned threads are bounded on their own (`max_abandoned`,
default 4 x the limit), past which calls are refused until stuck ones return. The threads are daemon
threads, so one stuck in a tool never keeps the process from exiting: that is why neither
`anyio.to_thread` nor `ThreadPoolExecutor` runs them (both join their threads at exit).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
import queue
import threading
import weakref
from collections.abc import Callable, Coroutine, Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import anyio

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

DEFAULT_MAX_WORKERS = 32
ENV_MAX_WORKERS = "ECHO_TOOLS_MAX_WORKERS"

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


# -- is a loop running here? (asked here only) -------------------------------------------------------


def loop_running() -> bool:
    """Whether an event loop is running in the calling thread: a sync entry point must not block it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop in this thread
        return False
    return True


def refuse_in_loop(what: str, instead: str) -> None:
    """The one check of every blocking entry point (`invoke_sync`, `close`, ...): RuntimeError naming
    `what` and what to do `instead` when the calling thread runs an event loop it would block.

    Raises:
        RuntimeError: an event loop is running in this thread.
    """
    if loop_running():
        raise RuntimeError(f"{what} cannot run inside a running event loop (it would block it); {instead}")


def blocking(sync: Callable[[], T], on_loop: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """The one blocking entry of a sync caller that may be called from anywhere (a CrewAI or LangChain
    tool's `run`): `sync()` in a thread without a running loop; in one with a loop (an async crew calling
    sync tools), `on_loop()` on the background loop instead, never blocking that loop re-entrantly."""
    if not loop_running():
        return sync()
    return run_sync(on_loop())


class PerLoop(Generic[K, T]):
    """Resources bound to one event loop (locks, semaphores, HTTP clients), kept per running loop and key,
    made on first use there and gone with their loop: the one home of every per-loop cache."""

    def __init__(self) -> None:
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[K, T]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()  # loops on several threads may ask at once

    def get(self, key: K, make: Callable[[], T]) -> T:
        """The running loop's resource for `key` (made by `make()` when it has none)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            kept = self._by_loop.get(loop)
            if kept is None:
                kept = self._by_loop[loop] = {}
            value = kept.get(key)
            if value is None:
                value = kept[key] = make()
        return value

    def drain(self) -> list[tuple[asyncio.AbstractEventLoop, T]]:
        """Every resource kept, with its loop, forgotten here (for the caller to close)."""
        with self._lock:
            found = [(loop, value) for loop, kept in self._by_loop.items() for value in kept.values()]
            self._by_loop.clear()
        return found


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


_WAITING, _RUNNING, _DONE = range(3)
_WouldBlock: type[Exception] = Exception  # anyio.WouldBlock, bound when the first limiter is made


class WorkerPool:
    """The bounded worker threads of sync tools; see the module doc."""

    def __init__(self, max_workers: int = DEFAULT_MAX_WORKERS, max_abandoned: int | None = None) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, got {max_workers!r}")
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned if max_abandoned is not None else 4 * max_workers
        self.abandoned = 0  # threads still running a job whose caller stopped waiting
        self._lock = threading.Lock()
        self._pid = -1  # the process the state below belongs to (a forked child has none of the threads)
        self._tokens: anyio.CapacityLimiter | None = None
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for a job
        self._started = 0

    async def run(self, fn: Callable[..., Any], timeout_s: float | None = None, *args: Any) -> Any:
        """Run `fn(*args)` on a worker thread and await it; cancelling the await abandons the job.

        Raises:
            WorkersBusy: no worker is free; nothing ran.
            WaitTimedOut: `timeout_s` passed first; the job is abandoned.
        """
        job = _Job(self, fn, args)
        job.loop = loop = asyncio.get_running_loop()
        job.waiter = waiter = loop.create_future()
        self._start(job)
        # a timer on the waiter itself: a third of what `anyio.fail_after` or `asyncio.timeout` cost here
        timer = None if timeout_s is None else loop.call_later(timeout_s, _expire, waiter, timeout_s)
        try:
            await waiter
        finally:  # cancelled, or past the deadline: the caller is gone, so is its claim on the thread
            if timer is not None:
                timer.cancel()
            self._release(job)
        return job.outcome()

    def call(self, fn: Callable[..., Any], timeout_s: float, *args: Any) -> Any:
        """Run `fn(*args)` on a worker thread and block this thread up to `timeout_s` for its outcome.

        Raises:
            WorkersBusy: no worker is free; nothing ran.
            WaitTimedOut: the timeout passed first; the job is abandoned.
        """
        job = _Job(self, fn, args)
        job.done = done = threading.Lock()
        done.acquire()
        self._start(job)
        try:
            if not done.acquire(timeout=min(timeout_s, threading.TIMEOUT_MAX)):
                raise WaitTimedOut(f"the job did not finish within {timeout_s:g} s")
        finally:  # Ctrl-C while waiting too: the caller is gone, so is its claim on the thread
            self._release(job)
        return job.outcome()

    def _start(self, job: _Job) -> None:
        """Take a token (or refuse at once) and hand `job` to an idle thread, or to a new one."""
        with self._lock:
            if self._pid != job.pid:  # first use, or a forked child: none of the parent's threads
                self._pid, self.abandoned, self._idle = job.pid, 0, 0
                self._tokens, self._jobs = _new_limiter(self.max_workers), queue.SimpleQueue()
            assert self._tokens is not None
            if self.abandoned >= self.max_abandoned or not _take(self._tokens, job):
                raise WorkersBusy(self._busy_message())
            spawn = self._idle == 0
            if spawn:
                self._started += 1
            else:
                self._idle -= 1
        if spawn:  # daemon: a thread stuck in a tool never keeps the process from exiting
            name = f"echo-tools-worker-{self._started}"
            threading.Thread(target=self._work, args=(self._jobs,), name=name, daemon=True).start()
        self._jobs.put(job)

    def _release(self, job: _Job) -> None:
        """The caller stopped waiting: its token goes back; a job still running is abandoned."""
        with self._lock:
            if job.state == _RUNNING:
                job.abandoned = True
                self.abandoned += 1
            elif job.state == _WAITING:
                job.state = _DONE  # never started: it never will
            if self._tokens is not None and job.pid == self._pid:
                self._tokens.release_on_behalf_of(job)

    def _work(self, jobs: queue.SimpleQueue[_Job]) -> None:
        while True:
            job = jobs.get()
            job.run()
            del job  # do not keep the last result alive while idle

    def _resize(self, max_workers: int) -> None:
        with self._lock:
            self.max_workers, self.max_abandoned = max_workers, 4 * max_workers
            if self._tokens is not None:
                self._tokens.total_tokens = max_workers

    def _busy_message(self) -> str:
        stuck = f", {self.abandoned} more stuck in calls that timed out" if self.abandoned else ""
        return (
            f"all {self.max_workers} worker threads for sync tools are busy{stuck}; the call was not "
            f"started. Try again later, or raise the limit: {ENV_MAX_WORKERS}={2 * self.max_workers} "
            f"or echo_tools.runtime.set_max_workers({2 * self.max_workers})"
        )


class _Job:
    """One call on a worker thread, and how its caller hears of the end: a lock (a blocking caller) or a
    future of its event loop (an awaiting one)."""

    __slots__ = (
        "abandoned",
        "args",
        "done",
        "error",
        "fn",
        "loop",
        "pid",
        "pool",
        "result",
        "state",
        "waiter",
    )

    def __init__(self, pool: WorkerPool, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self.pool, self.fn, self.args, self.pid = pool, fn, args, os.getpid()
        self.state, self.abandoned = _WAITING, False
        self.result: Any = None
        self.error: BaseException | None = None
        self.done: threading.Lock | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.waiter: asyncio.Future[None] | None = None

    def run(self) -> None:
        pool = self.pool
        with pool._lock:
            start = self.state == _WAITING
            self.state = _RUNNING if start else self.state
        if start:
            try:
                self.result = self.fn(*self.args)
            except BaseException as exc:  # boundary: the job's outcome, whatever it is, goes to its caller
                self.error = exc
        with pool._lock:
            if self.abandoned:
                pool.abandoned -= 1
            self.state = _DONE
            pool._idle += 1  # idle before the caller hears back, so its next call finds this thread free
        if not start:
            return
        if self.done is not None:
            self.done.release()
        elif self.loop is not None and self.waiter is not None:
            try:
                self.loop.call_soon_threadsafe(_settle, self.waiter)
            except RuntimeError:  # its loop is closed: nobody waits any more
                pass

    def outcome(self) -> Any:
        if self.error is not None:
            error, self.error = self.error, None  # no cycle through the traceback
            raise error
        return self.result


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _expire(waiter: asyncio.Future[None], timeout_s: float) -> None:
    if not waiter.done():
        waiter.set_exception(WaitTimedOut(f"the job did not finish within {timeout_s:g} s"))


def _take(tokens: anyio.CapacityLimiter, job: _Job) -> bool:
    """One token for `job` if one is free: never waits."""
    try:
        tokens.acquire_on_behalf_of_nowait(job)
    except _WouldBlock:
        return False
    return True


def _new_limiter(tokens: int) -> anyio.CapacityLimiter:
    """A limiter usable from any thread (only its `_nowait` methods are used, under the pool's lock)."""

    global _WouldBlock
    import anyio  # here, not at module load: `echo-tools list` never needs it

    _WouldBlock = anyio.WouldBlock

    async def make() -> anyio.CapacityLimiter:
        return anyio.CapacityLimiter(tokens)

    if not loop_running():  # a plain thread: anyio makes its limiter for an event loop, so give it one
        return anyio.run(make)
    return anyio.CapacityLimiter(tokens)


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
    worker_pool()._resize(max_workers)


async def run_in_worker(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)` on a worker thread (with the caller's context variables), awaited.

    If the awaiting task is cancelled (a timeout), the call keeps running to its end on its thread and
    its result is dropped: Python threads cannot be killed. Use `isolation: "process"` for work that must stop.

    Raises:
        WorkersBusy: every worker is busy; nothing ran.
    """
    ctx = contextvars.copy_context()
    return await worker_pool().run(lambda: ctx.run(fn, *args, **kwargs))


def await_in_worker(fn: Callable[..., Any], timeout_s: float, *args: Any) -> Coroutine[Any, Any, Any]:
    """`await` twin of `call_in_worker`: `fn(*args)` on a worker thread, awaited up to `timeout_s`.

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
