"""Per-tool metrics of an executor: counts of calls, failures and timeouts, and latency percentiles.

Latencies come from a bounded reservoir per tool (the most recent `RESERVOIR` calls).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

RESERVOIR = 2048


class _ToolStats:
    __slots__ = ("calls", "failures", "latencies", "timeouts")

    def __init__(self) -> None:
        self.calls = 0
        self.failures = 0
        self.timeouts = 0
        self.latencies: deque[float] = deque(maxlen=RESERVOIR)


def percentile(sorted_values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of an ascending list (0.0 for an empty one)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


class MetricsRecorder:
    """Thread-safe counters and latency reservoirs, keyed by tool id."""

    def __init__(self) -> None:
        self._stats: dict[str, _ToolStats] = {}
        self._lock = threading.Lock()

    def record(self, tool_id: str, duration_ms: float, error_type: str | None) -> None:
        """Count one finished call of `tool_id` (error_type None when it succeeded)."""
        with self._lock:
            stats = self._stats.get(tool_id)
            if stats is None:
                stats = self._stats[tool_id] = _ToolStats()
            stats.calls += 1
            if error_type is not None:
                stats.failures += 1
                if error_type == "timeout":
                    stats.timeouts += 1
            stats.latencies.append(duration_ms)

    def snapshot(self) -> dict[str, dict[str, Any]]:
        """`{tool_id: {calls, failures, timeouts, p50_ms, p95_ms, p99_ms, max_ms}}`."""
        with self._lock:
            copied = {
                tool_id: (s.calls, s.failures, s.timeouts, sorted(s.latencies))
                for tool_id, s in self._stats.items()
            }
        out: dict[str, dict[str, Any]] = {}
        for tool_id, (calls, failures, timeouts, latencies) in copied.items():
            out[tool_id] = {
                "calls": calls,
                "failures": failures,
                "timeouts": timeouts,
                "p50_ms": round(percentile(latencies, 0.50), 4),
                "p95_ms": round(percentile(latencies, 0.95), 4),
                "p99_ms": round(percentile(latencies, 0.99), 4),
                "max_ms": round(latencies[-1], 4) if latencies else 0.0,
            }
        return out

    def reset(self) -> None:
        with self._lock:
            self._stats.clear()
