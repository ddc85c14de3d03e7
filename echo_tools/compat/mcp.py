"""The MCP SDK's private names the pooled sessions need (`echo_tools.mcp.connection`), in one place.

A request's JSON-RPC id is what `notifications/cancelled` must name, what the server's progress and
sampling requests point back to, and how a broken response stream is tied to the call it broke. The SDK's
`ClientSession.send_request` assigns that id inside and returns only the result; no public API tells it,
so it is read from the session's counter before the request is sent. Known in the 1.x line
(`mcp>=1.20,<2`, `BaseSession._request_id`).
"""

from __future__ import annotations

import json
from typing import Any

SUPPORTED = ">=1.20,<2"  # the pyproject pin; tests/echo_tools/test_compat_mcp.py checks the names in it
PRIVATE_NAMES = ("BaseSession._request_id",)


def next_request_id(session: Any) -> int:
    """The id `session.send_request` gives the next request: it takes it before its first await, so read
    right before the call it names that call."""
    request_id: int = session._request_id
    return request_id


def request_id_of(body: bytes | str) -> Any:
    """The JSON-RPC id in the body of a request we sent (streamable HTTP), or None when it has none."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None
