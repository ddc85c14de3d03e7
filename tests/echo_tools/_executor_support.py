"""Shared helpers of the executor and backend tests: a registry that allows the fixture tool modules."""

from __future__ import annotations

from typing import Any

from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor, ToolRegistry

FIXTURES = "tests.echo_tools.fixture_tools"
BASIC = f"{FIXTURES}.basic"

NUMBERS = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


def local_tool(name: str, function: str, module: str = BASIC, **fields: Any) -> dict[str, Any]:
    """A `local` tool definition calling `module.function`; extra execution_config keys via `config=`."""
    config = {"module": module, "function": function, **fields.pop("config", {})}
    return {"name": name, "tool_type": "local", "execution_config": config, **fields}


def make_registry(*tools: dict[str, Any]) -> ToolRegistry:
    registry = ToolRegistry(allowed_modules=[FIXTURES], egress=EgressPolicy.local())
    for tool in tools:
        registry.register(tool)
    return registry


def make_executor(*tools: dict[str, Any], **kwargs: Any) -> tuple[ToolExecutor, MemoryEventLog]:
    """An executor over a fresh in-memory registry holding `tools`, with a MemoryEventLog attached."""
    log = MemoryEventLog()
    kwargs.setdefault("egress", EgressPolicy.local())
    return ToolExecutor(make_registry(*tools), [log], **kwargs), log
