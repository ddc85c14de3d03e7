"""The `langchain` backend: a LangChain `BaseTool` (`{module, class}` or `{module, factory}`) run by the executor.

The tool is built once per tool version and called through LangChain's own entry points: `ainvoke(args)`
when it has an async implementation, else `invoke(args)` on one of our worker threads (LangChain would
use the loop's default executor, whose threads `asyncio.run` waits for at shutdown even after a timeout
abandoned them). langchain-core is imported only when such a tool runs.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import ToolBackend
from echo_tools.backends.local import build_instance, import_module_checked, run_in_worker
from echo_tools.errors import ToolConfigError, ToolError, ToolExecutionError

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.models import ToolContext, ToolDef


class LangChainBackend(ToolBackend):
    """Runs LangChain tools; one instance per tool version."""

    def __init__(self, executor: ToolExecutor) -> None:
        self.executor = executor
        self._instances: dict[str, tuple[ToolDef, Any, bool]] = {}
        self._lock = threading.Lock()

    def instance(self, tool: ToolDef) -> tuple[Any, bool]:
        """`(langchain_tool, is_async)` for `tool`, built on first use."""
        found = self._instances.get(tool.tool_id)
        if found is not None and found[0] is tool:
            return found[1], found[2]
        with self._lock:
            module = import_module_checked(tool, self.executor.registry.allowed_modules)
            instance = build_instance(tool, module)
            from langchain_core.tools import BaseTool

            if not isinstance(instance, BaseTool):
                raise ToolConfigError(
                    f"Tool {tool.tool_id!r}: {type(instance).__name__} is not a langchain_core.tools.BaseTool",
                    tool_id=tool.tool_id,
                    field="execution_config.class",
                )
            if hasattr(instance, "coroutine"):  # StructuredTool / Tool: async exactly when given a coroutine
                is_async = instance.coroutine is not None
            else:
                is_async = type(instance)._arun is not BaseTool._arun
            self._instances[tool.tool_id] = (tool, instance, is_async)
        return instance, is_async

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        found = self._instances.get(tool.tool_id)
        if found is not None and found[0] is tool:
            instance, is_async = found[1], found[2]
        else:  # the first call imports the tool's module: off the loop
            instance, is_async = await run_in_worker(self.instance, tool)
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

    def forget(self, tool_id: str | None = None) -> None:
        with self._lock:
            if tool_id is None:
                self._instances.clear()
            else:
                self._instances.pop(tool_id, None)


def _is_message(value: Any) -> bool:
    from langchain_core.messages import BaseMessage

    return isinstance(value, BaseMessage)
