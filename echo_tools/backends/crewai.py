"""The `crewai` backend: a CrewAI `BaseTool` class (`{module, class}` or `{module, factory}`) run by the executor.

The tool is built once per tool version and called through its own public entry points, so its argument
model and usage limits still apply: `arun(**args)` when the class implements `_arun`, otherwise
`run(**args)` in a worker thread. CrewAI is imported only when such a tool first runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from echo_tools._telemetry import disable_third_party_telemetry
from echo_tools.backends._framework import FrameworkToolBackend, framework_class
from echo_tools.backends.local import run_in_worker
from echo_tools.errors import ToolError, ToolExecutionError

if TYPE_CHECKING:
    from echo_tools.models import ToolContext, ToolDef


class CrewAIBackend(FrameworkToolBackend):
    """Runs CrewAI tool classes; one instance per tool version."""

    framework_class_name = "crewai.tools.BaseTool"

    def base_class(self) -> type:
        disable_third_party_telemetry()  # before CrewAI first loads through us
        return framework_class("crewai.tools", "BaseTool", "a crewai tool")

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        instance, is_async = await self.ainstance(tool)
        try:
            if is_async:
                result = await instance.arun(**args)
            else:
                result = await run_in_worker(instance.run, **args)
        except ToolError:
            raise
        except Exception as exc:  # boundary: the CrewAI tool's own code
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r} (CrewAI {type(instance).__name__}) raised {type(exc).__name__}: {exc}",
                tool_id=tool.tool_id,
            ) from exc
        from crewai.tools.tool_failure import ToolFailure

        if isinstance(result, ToolFailure):  # CrewAI reports some failures (usage limits) as values
            raise ToolExecutionError(f"Tool {tool.tool_id!r}: {result.message}", tool_id=tool.tool_id)
        return result
