"""Third-party telemetry off by default in every process that imports echo-tools.

CrewAI, OpenTelemetry, LangSmith and Chroma send usage data or traces unless told not to; on machines
without outbound network that is a stream of failed connections, and nobody asked for it. Only defaults
are set: a variable the user set (to anything) is left alone, so telemetry can be turned back on.
"""

from __future__ import annotations

import os

TELEMETRY_DEFAULTS = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "CREWAI_DISABLE_TRACKING": "true",
    "CREWAI_TRACING_ENABLED": "false",
    "OTEL_SDK_DISABLED": "true",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "ANONYMIZED_TELEMETRY": "False",
}


def disable_third_party_telemetry() -> None:
    """Set each telemetry opt-out that the environment does not already decide."""
    for key, value in TELEMETRY_DEFAULTS.items():
        os.environ.setdefault(key, value)
