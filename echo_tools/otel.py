"""OpenTelemetry for tool calls: a sink that turns each finished call into a span.

Optional: it needs `opentelemetry-api` (CrewAI installs it), imported only when the sink is built. Spans go
to whatever tracer provider the application configured; echo-tools configures none and exports nothing
itself (importing `echo_tools` sets `OTEL_SDK_DISABLED=true` unless the environment decides otherwise, so
an application that wants spans sets `OTEL_SDK_DISABLED=false`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from echo_tools.events import ToolEvent

FINISHED = ("tool.completed", "tool.failed", "tool.timeout")
_CONTEXT_KEYS = ("agent_id", "workflow_id", "run_id", "node_id", "tool_call_id", "trace_id")


class OpenTelemetrySink:
    """An event sink: each `tool.completed`, `tool.failed` or `tool.timeout` becomes one span.

    The span is named `tool <tool name>`, starts `duration_ms` before the event and ends at it, carries the
    tool and context ids as `echo_tools.*` attributes, and has status ERROR (with the error text) when the
    call failed or timed out. Inputs and outputs are not recorded.

    Args:
        tracer: an OpenTelemetry tracer (default: `trace.get_tracer("echo_tools")` of the global provider).
    """

    def __init__(self, tracer: Any = None) -> None:
        from opentelemetry import trace

        self._trace = trace
        self._tracer = tracer if tracer is not None else trace.get_tracer("echo_tools")

    def __call__(self, event: ToolEvent) -> None:
        if event.type not in FINISHED:
            return
        end_ns = _epoch_ns(event.timestamp)
        start_ns = end_ns - int((event.duration_ms or 0.0) * 1_000_000)
        attributes: dict[str, Any] = {
            "echo_tools.tool_id": event.tool_id or "",
            "echo_tools.tool_type": event.tool_type or "",
            "echo_tools.outcome": event.type,
            "echo_tools.attempts": event.attempts or 0,
        }
        for key in _CONTEXT_KEYS:
            value = getattr(event, key)
            if value:
                attributes[f"echo_tools.{key}"] = value
        if event.error_type:
            attributes["echo_tools.error_type"] = event.error_type
        span = self._tracer.start_span(f"tool {event.tool_name or event.tool_id}", start_time=start_ns)
        span.set_attributes(attributes)
        if event.type != "tool.completed":
            span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, event.error or event.type))
        span.end(end_time=end_ns)


def _epoch_ns(timestamp: str) -> int:
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return int(moment.timestamp() * 1_000_000_000)
