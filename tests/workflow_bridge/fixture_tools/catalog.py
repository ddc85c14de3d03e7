"""Tool definitions for the fixture tools, and a throw-away registry holding them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_tools.registry import ToolRegistry

MODULE = "tests.workflow_bridge.fixture_tools"
BASIC = f"{MODULE}.basic"


def _local(name: str, function: str, schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "description": f"Fixture tool {name}.",
        "tool_type": "local",
        "input_schema": schema,
        "execution_config": {"module": BASIC, "function": function, **extra.pop("config", {})},
        **extra,
    }


def definitions() -> list[dict[str, Any]]:
    """The fixture tools: add, lookup (optional fields), configure (nested), explode (fails), track, shout."""
    number = {"type": "number"}
    return [
        _local(
            "Add",
            "add",
            {
                "type": "object",
                "properties": {
                    "a": {**number, "description": "first"},
                    "b": {**number, "description": "second"},
                },
                "required": ["a", "b"],
                "additionalProperties": False,
            },
            side_effect="pure",
        ),
        _local(
            "Lookup",
            "lookup",
            {
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to look up"},
                    "limit": {"type": "integer", "minimum": 1, "description": "At most this many"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "mode": {"type": "string", "enum": ["fast", "deep"], "description": "How hard to look"},
                    "region": {"type": "string", "default": "eu"},
                },
                "required": ["query"],
            },
        ),
        _local(
            "Configure",
            "configure",
            {
                "type": "object",
                "properties": {
                    "settings": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "retries": {"type": "integer"},
                            "owner": {
                                "type": "object",
                                "properties": {"id": {"type": "string"}, "email": {"type": "string"}},
                                "required": ["id"],
                            },
                        },
                        "required": ["name"],
                    },
                    "label": {"type": "string"},
                },
                "required": ["settings"],
            },
        ),
        _local(
            "Explode",
            "explode",
            {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]},
        ),
        _local(
            "Track",
            "track",
            {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]},
        ),
        _local(
            "Shout",
            "shout",
            {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        ),
    ]


def make_registry(path: Path | None = None, **kwargs: Any) -> ToolRegistry:
    """A registry (in memory, or stored under `path`) holding every fixture tool."""
    registry = ToolRegistry(path, allowed_modules=[MODULE], **kwargs)
    for definition in definitions():
        registry.register(definition)
    return registry
