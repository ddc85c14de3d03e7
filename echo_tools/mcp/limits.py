"""How much of an MCP server's answers a session reads and keeps (`max_result_bytes` of its config).

Its own module because both the config checks (`mcp.config`) and the sessions (`mcp.connection`) read
it, and the config module imports the sessions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DEFAULT_MAX_RESULT_BYTES = 8 * 1024 * 1024


def max_result_bytes(config: Mapping[str, Any]) -> int:
    """The largest answer a server's session reads and keeps (`max_result_bytes`, default 8 MiB)."""
    return int(config.get("max_result_bytes") or DEFAULT_MAX_RESULT_BYTES)
