"""The run's trace context for an MCP request's `_meta` (W3C `traceparent`, `tracestate`).

The 2026-07-28 revision carries trace context in a request's `_meta`; echo-tools puts it there under
either SDK generation, from the OpenTelemetry context current where the call is made (a span of the host's
run), when `opentelemetry` is installed. Without it, or without a valid span, nothing is added.
"""

from __future__ import annotations

from typing import Any

__all__ = ["trace_meta"]

_KEYS = ("traceparent", "tracestate")


def trace_meta() -> dict[str, str]:
    """`{"traceparent": ..., "tracestate"?: ...}` of the current OpenTelemetry span, or `{}`."""
    if not _OTEL:
        try:
            from opentelemetry import trace
            from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
        except ImportError:
            _OTEL.append(None)
        else:
            _OTEL.append((trace, TraceContextTextMapPropagator()))
    found = _OTEL[0]
    if found is None or not found[0].get_current_span().get_span_context().is_valid:
        return {}
    carrier: dict[str, str] = {}
    found[1].inject(carrier)
    return {key: carrier[key] for key in _KEYS if carrier.get(key)}


_OTEL: list[Any] = []  # (the trace API, a W3C propagator), or None without opentelemetry
