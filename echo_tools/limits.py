"""Per-tool `max_concurrency`: one semaphore per tool and per event loop, since a semaphore is bound to one.

A call waits for a slot inside its deadline; tools without the setting never touch this.
"""

from __future__ import annotations

import asyncio

from echo_tools.models import ToolDef
from echo_tools.runtime import PerLoop


class ConcurrencyLimits:
    """The `max_concurrency` semaphores of an executor's tools, kept per running event loop."""

    def __init__(self) -> None:
        self._semaphores: PerLoop[tuple[str, int], asyncio.Semaphore] = PerLoop()

    def get(self, tool: ToolDef) -> asyncio.Semaphore | None:
        """The semaphore of `tool` on the running loop; None when the tool sets no limit."""
        size = tool.execution_config.get("max_concurrency")
        if not size:
            return None
        # a re-registered size gets its own semaphore
        return self._semaphores.get((tool.tool_id, int(size)), lambda: asyncio.Semaphore(int(size)))
