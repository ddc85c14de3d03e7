"""CrewAI's own telemetry off by default where echo-tools uses CrewAI (never merely on `import echo_tools`).

CrewAI sends usage data and traces to its own service unless told not to; on machines without outbound
network that is a stream of failed connections, and nobody asked for it. Whatever is about to import CrewAI
on our behalf (the `crewai` backend, the bridge) calls `disable_third_party_telemetry()` first. Only
CrewAI's own switches are set, and only as defaults (a variable the user set, to anything, is left alone):
the host application's tracing (OpenTelemetry, LangSmith) is the host's to decide.
"""

from __future__ import annotations

import os

TELEMETRY_DEFAULTS = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
}

# read by the host's own tracing; importing echo-tools must leave them as they were
HOST_TRACING_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "LANGCHAIN_TRACING_V2",
    "LANGSMITH_TRACING",
    "ANONYMIZED_TELEMETRY",
)


def disable_third_party_telemetry() -> None:
    """Set each of CrewAI's telemetry opt-outs that the environment does not already decide."""
    for key, value in TELEMETRY_DEFAULTS.items():
        os.environ.setdefault(key, value)
