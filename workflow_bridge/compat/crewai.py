"""CrewAI's private names the bridge relies on, in one place (`crewai>=1.10,<2`).

- `CrewStructuredTool._parse_args`: CrewAI's own `invoke` parses the ReAct arguments through it; the
  executor validates against the tool's JSON Schema instead, so `StructuredToolBase` routes it to a public
  `parse_arguments` that subclasses override.
- `CrewStructuredTool._original_tool`: how CrewAI's agent finds the `BaseTool` behind a structured tool
  (`crewai.tools.structured_tool`, `getattr(tool, "_original_tool", None)`); no public setter exists.
- `Crew._task_output_handler`: the per-kickoff SQLite task log, which has no public switch.

The usage count is kept through public fields (`current_usage_count`), not `_increment_usage_count`.
"""

from __future__ import annotations

from typing import Any

from crewai.tools.structured_tool import CrewStructuredTool

SUPPORTED = ">=1.10,<2"  # the pyproject pin; tests/workflow_bridge/test_compat_crewai.py checks the names
PRIVATE_NAMES = (
    "CrewStructuredTool._parse_args",
    "CrewStructuredTool._original_tool",
    "Crew._task_output_handler",
)


class StructuredToolBase(CrewStructuredTool):
    """A `CrewStructuredTool` whose argument parsing is the public `parse_arguments`."""

    def _parse_args(self, raw_args: str | dict[str, Any]) -> dict[str, Any]:
        return self.parse_arguments(raw_args)

    def parse_arguments(self, raw_args: str | dict[str, Any]) -> dict[str, Any]:
        """The arguments of one call (CrewAI's own parsing unless overridden)."""
        return super()._parse_args(raw_args)


def set_original_tool(structured: CrewStructuredTool, tool: Any) -> None:
    """Tell CrewAI which `BaseTool` stands behind `structured`."""
    structured._original_tool = tool


def original_tool(structured: CrewStructuredTool) -> Any:
    """The `BaseTool` behind `structured` (None when none was set)."""
    return structured._original_tool


def count_use(structured: CrewStructuredTool) -> None:
    """One more use of `structured`, mirrored on its `BaseTool` as CrewAI does."""
    structured.current_usage_count += 1
    tool = original_tool(structured)
    if tool is not None:
        tool.current_usage_count = structured.current_usage_count


def replace_task_output_handler(crew: Any, handler: Any) -> bool:
    """Put `handler` in place of `crew`'s task output log; False when this CrewAI has no such log (or
    refuses the replacement), and the crew keeps its own."""
    if not hasattr(crew, "_task_output_handler"):
        return False
    try:
        crew._task_output_handler = handler
    except (AttributeError, TypeError, ValueError):  # a CrewAI that validates it: keep its store
        return False
    return True
