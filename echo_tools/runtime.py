"""The process-wide background event loop that sync callers use to run async work.

`run_sync(coro)` runs a coroutine on one long-lived loop in a daemon thread and blocks the calling thread
for its result. It works from any thread, including one whose own loop is running (a sync CrewAI tool
called from inside an async graph). Long-lived async sessions (MCP) live on this loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


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
