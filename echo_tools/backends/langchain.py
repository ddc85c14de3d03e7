"""The `langchain` backend: a LangChain `BaseTool` (`{module, class}` or `{module, factory}`) run by the executor.

The tool is built once per tool version and called through LangChain's own entry points: `ainvoke(args)`
when it has an async implementation, else `invoke(args)` on one of our worker threads (LangChain would
use the loop's default executor, whose threads `asyncio.run` waits for at shutdown even after a timeout
abandoned them). langchain-core is imported only when such a tool runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from echo_tools.backends._framework import FrameworkToolBackend, framework_class
from echo_tools.backends.local import run_in_worker
from echo_tools.errors import ToolError, ToolExecutionError

if TYPE_CHECKING:
    from echo_tools.models import ToolContext, ToolDef


class LangChainBackend(FrameworkToolBackend):
    """Runs LangChain tools; one instance per tool version."""

    framework_class_name = "langchain_core.tools.BaseTool"

    def base_class(self) -> type:
        return framework_class("langchain_core.tools", "BaseTool", "a langchain tool")

    def is_async(self, instance: Any, base: type) -> bool:
        if hasattr(instance, "coroutine"):  # StructuredTool / Tool: async exactly when given a coroutine
            return instance.coroutine is not None
        return super().is_async(instance, base)

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        instance, is_async = await self.ainstance(tool)
        try:
            if is_async:
                result = await instance.ainvoke(args)
            else:
                result = await run_in_worker(instance.invoke, args)
        except ToolError:
            raise
        except Exception as exc:  # boundary: the LangChain tool's own code (ToolException included)
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r} (LangChain {type(instance).__name__}) raised {type(exc).__name__}: {exc}",
                tool_id=tool.tool_id,
            ) from exc
        return getattr(result, "content", result) if _is_message(result) else result


def _is_message(value: Any) -> bool:
    from langchain_core.messages import BaseMessage

    return isinstance(value, BaseMessage)
