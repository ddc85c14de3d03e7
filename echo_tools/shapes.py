"""JSON shapes that the HTTP API, the CLI and the bridge all answer with (nothing web- or CLI-specific)."""

from __future__ import annotations

from typing import Any


def event_dict(event: Any) -> dict[str, Any]:
    """A `ToolEvent`, a node event object or a dict -> a plain dict (for SSE frames and the CLI)."""
    if isinstance(event, dict):
        return event
    to_dict = getattr(event, "to_dict", None)
    if callable(to_dict):
        data = to_dict()
        if isinstance(data, dict):
            return data
    return {"type": type(event).__name__, "detail": str(event)}
