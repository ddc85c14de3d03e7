"""The `langchain` backend: a LangChain `BaseTool` (`{module, class}` or `{module, factory}`) run by the executor.

The tool is built once per tool version and awaited through `ainvoke(args)`, LangChain's own entry point
(a sync-only tool is run by LangChain in a thread). langchain-core is imported only when such a tool runs.
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
        self._instances: dict[str, tuple[ToolDef, Any]] = {}
        self._lock = threading.Lock()

    def instance(self, tool: ToolDef) -> Any:
        """The LangChain tool object of `tool`, built on first use."""
        found = self._instances.get(tool.tool_id)
        if found is not None and found[0] is tool:
            return found[1]
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
            self._instances[tool.tool_id] = (tool, instance)
        return instance

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        found = self._instances.get(tool.tool_id)
        # the first call imports the tool's module: off the loop
        instance = (
            found[1] if found is not None and found[0] is tool else await run_in_worker(self.instance, tool)
        )
        try:
            result = await instance.ainvoke(args)
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
