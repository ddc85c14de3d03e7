"""The executor's cache of results of deterministic, pure tools (`ToolDef.cache_ttl_s`).

Keyed by tool id, version and the canonical JSON of the normalised input; bounded in entries (least
recently used dropped first); an entry lives `cache_ttl_s` seconds and only for the very definition that
made it (a tool registered again starts afresh). Only successful results are kept.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from echo_tools.jsonvalue import to_json_value
from echo_tools.models import Determinism, SideEffect, ToolDef

__all__ = ["DEFAULT_MAX_ENTRIES", "CachedResult", "ResultCache", "cache_ttl"]

DEFAULT_MAX_ENTRIES = 1_000

CacheKey = tuple[str, str, str]


def cache_ttl(tool: ToolDef) -> float | None:
    """How long `tool`'s results may be reused: its `cache_ttl_s` when it is deterministic and pure."""
    ttl = tool.cache_ttl_s
    if (
        not ttl
        or tool.determinism is not Determinism.DETERMINISTIC
        or tool.side_effect is not SideEffect.PURE
    ):
        return None
    return ttl


@dataclass(frozen=True)
class CachedResult:
    """A kept result: the output and metadata of the call that made it."""

    tool: ToolDef  # the definition that made it: a later definition of the same id does not read it
    output: Any
    metadata: dict[str, Any]
    expires: float


class ResultCache:
    """Results by call, at most `max_entries`, expiring on `clock` (seconds; `time.monotonic` by default)."""

    def __init__(
        self, max_entries: int = DEFAULT_MAX_ENTRIES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, got {max_entries!r}")
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[CacheKey, CachedResult] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def key(tool: ToolDef, args: dict[str, Any]) -> CacheKey | None:
        """The key of a call of `tool` with `args`; None when the input has values JSON cannot hold."""
        try:
            text = json.dumps(
                args, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            )
        except (TypeError, ValueError):
            return None
        return (tool.tool_id, tool.version, text)

    def get(self, key: CacheKey, tool: ToolDef) -> CachedResult | None:
        """The live result kept under `key` by this very definition of the tool, or None."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if entry.tool is not tool or entry.expires <= self._clock():
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry

    def put(self, key: CacheKey, tool: ToolDef, output: Any, metadata: dict[str, Any], ttl_s: float) -> None:
        """Keep a successful result for `ttl_s` seconds (a copy: the caller may change theirs)."""
        entry = CachedResult(tool, to_json_value(output), dict(metadata), self._clock() + ttl_s)
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)

    def forget(self, tool_id: str | None = None) -> None:
        """Drop the results of one tool (every result when None)."""
        with self._lock:
            if tool_id is None:
                self._entries.clear()
            else:
                for key in [k for k in self._entries if k[0] == tool_id]:
                    del self._entries[key]
