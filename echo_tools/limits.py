"""Per-tool `max_concurrency`: one semaphore per tool and per event loop, since a semaphore is bound to one.

A call waits for a slot inside its deadline; tools without the setting never touch this.
"""

from __future__ import annotations

import asyncio
import threading
import weakref

from echo_tools.models import ToolDef


class ConcurrencyLimits:
    """The `max_concurrency` semaphores of an executor's tools, kept per running event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # loops on several threads may ask at once
        # a loop that is gone takes its semaphores with it
        self._by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]
        ] = weakref.WeakKeyDictionary()

    def get(self, tool: ToolDef) -> asyncio.Semaphore | None:
        """The semaphore of `tool` on the running loop; None when the tool sets no limit."""
        size = tool.execution_config.get("max_concurrency")
        if not size:
            return None
        loop = asyncio.get_running_loop()
        key = (tool.tool_id, int(size))  # a re-registered size gets its own semaphore
        with self._lock:
            per_loop = self._by_loop.get(loop)
            if per_loop is None:
                per_loop = self._by_loop[loop] = {}
            semaphore = per_loop.get(key)
            if semaphore is None:
                semaphore = per_loop[key] = asyncio.Semaphore(int(size))
        return semaphore
