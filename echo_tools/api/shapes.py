"""Response shapes shared by the HTTP API and the CLI's JSON output (no web framework imported here).

The list entry keeps EchoAI's shape exactly, so its IDE reads our `/tools/list` unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from echo_tools.models import ToolDef
from echo_tools.shapes import event_dict

__all__ = ["event_dict", "list_item", "list_items"]


def list_item(tool: ToolDef) -> dict[str, Any]:
    """EchoAI's list entry: `{tool_id, name, description, tool_type, status, version, tags}`."""
    return {
        "tool_id": tool.tool_id,
        "name": tool.name,
        "description": tool.description,
        "tool_type": tool.tool_type.value,
        "status": tool.status.value,
        "version": tool.version,
        "tags": list(tool.tags),
    }


def list_items(tools: Iterable[ToolDef]) -> list[dict[str, Any]]:
    """`list_item` of each tool, in order."""
    return [list_item(t) for t in tools]
