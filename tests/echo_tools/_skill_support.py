"""What the skill tests share: local tools over `fixture_tools.basic`, skill definitions, and an executor
whose events are kept (`executor.log`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from echo_tools import MemoryEventLog, ToolDef, ToolExecutor, ToolRegistry

MODULE = "tests.echo_tools.fixture_tools.basic"
NUMBER = {"type": "number"}


def local_tool(tool_id: str, function: str, properties: dict[str, Any], **fields: Any) -> ToolDef:
    """A `local` tool calling `fixture_tools.basic.<function>`, named as its id."""
    return ToolDef(
        tool_id=tool_id,
        name=tool_id,
        execution_config={"module": MODULE, "function": function},
        input_schema={"type": "object", "properties": properties},
        **fields,
    )


def skill_tool(
    steps: list[dict[str, Any]], output: Any, *, tool_id: str, name: str, **fields: Any
) -> ToolDef:
    """A `skill` tool of `steps`, with `output` as its output mapping."""
    return ToolDef(
        tool_id=tool_id,
        name=name,
        tool_type="skill",
        execution_config={"steps": steps, "output": output},
        **fields,
    )


async def logged_executor(registry: ToolRegistry) -> AsyncIterator[ToolExecutor]:
    """An executor on `registry` with a MemoryEventLog as `executor.log` (a fixture body: yield, then close)."""
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log])
    executor.log = log  # type: ignore[attr-defined]
    yield executor
    await executor.aclose()
