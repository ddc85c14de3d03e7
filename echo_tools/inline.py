"""Calls that run in the calling thread, without an event loop: `invoke_sync`'s pipeline and inline tools.

`ToolExecutor.invoke_sync` runs the same coroutine as `invoke`, with waits that block, so it finishes
without ever suspending: `drive` steps it once instead of starting a loop. A tool that opted in to inline
calls (`SyncCall.inline`) runs in the caller's thread through `run_inline`, which cannot cut it short and
reports an overrun when it returns. Work that runs elsewhere (the background loop, worker threads) is
`echo_tools.runtime`'s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["InlineOverrun", "drive", "run_inline"]

T = TypeVar("T")
_perf = time.perf_counter


class InlineOverrun(TimeoutError):
    """An inline tool returned after its deadline: it ran to its end (nothing could stop it)."""


def run_inline(fn: Callable[[dict[str, Any]], Any], args: dict[str, Any], timeout_s: float) -> Any:
    """One attempt in the calling thread: it cannot be cut short, so an overrun is reported when it returns.

    Raises:
        InlineOverrun: `fn` returned after `timeout_s` seconds (its output is dropped).
    """
    started = _perf()
    output = fn(args)
    if _perf() - started > timeout_s:
        raise InlineOverrun
    return output


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a pipeline whose every wait blocks (`on_loop=False`): it finishes without ever suspending."""
    try:
        coro.send(None)
    except StopIteration as finished:
        return finished.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("the synchronous pipeline suspended, which it never should")  # a bug of ours
