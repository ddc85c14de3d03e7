"""What the `crewai` and `langchain` backends share: building a framework's tool object once per tool version.

Both load `{module, class}` / `{module, factory}` from an allowed module, check the object is the framework's
`BaseTool`, decide once whether it runs async, and cache `(tool, instance, is_async)` until `forget`.
A subclass says which framework class to expect and how to tell an async tool; it owns the call itself.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import BackendHost, ToolBackend, check_python_target, forget_entries
from echo_tools.backends.python_targets import build_instance, import_module_checked
from echo_tools.errors import ToolConfigError
from echo_tools.extras import MissingExtraError, require
from echo_tools.runtime import run_in_worker

if TYPE_CHECKING:
    from collections.abc import Sequence

    from echo_tools.egress import EgressPolicy
    from echo_tools.models import ToolDef


class FrameworkToolBackend(ToolBackend):
    """Base of backends running a framework's `BaseTool` objects; one instance per tool version."""

    framework_class_name = "BaseTool"  # for the error message, e.g. "crewai.tools.BaseTool"

    @classmethod
    def check_config(
        cls, tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
    ) -> None:
        check_python_target(tool, allowed_modules, kinds=("class", "factory"))

    def __init__(self, executor: BackendHost) -> None:
        self.executor = executor
        self._instances: dict[str, tuple[ToolDef, Any, bool]] = {}
        self._lock = threading.Lock()

    def base_class(self) -> type:
        """The framework's tool base class (imported here, on first use, never at echo_tools import)."""
        raise NotImplementedError

    def is_async(self, instance: Any, base: type) -> bool:
        """True when `instance` has its own async implementation (`base` is `base_class()`)."""
        return type(instance)._arun is not base._arun  # type: ignore[attr-defined]

    def instance(self, tool: ToolDef) -> tuple[Any, bool]:
        """`(framework_tool, is_async)` for `tool`, built on first use."""
        found = self._instances.get(tool.tool_id)
        if found is not None and found[0] is tool:
            return found[1], found[2]
        with self._lock:
            module = import_module_checked(tool, self.executor.registry.allowed_modules)
            instance = build_instance(tool, module, self.executor.registry.allowed_modules)
            base = self.base_class()
            if not isinstance(instance, base):
                raise ToolConfigError(
                    f"Tool {tool.tool_id!r}: {type(instance).__name__} is not a {self.framework_class_name}",
                    tool_id=tool.tool_id,
                    field="execution_config.class",
                )
            is_async = self.is_async(instance, base)
            self._instances[tool.tool_id] = (tool, instance, is_async)
        return instance, is_async

    async def ainstance(self, tool: ToolDef) -> tuple[Any, bool]:
        """`instance(tool)` for a call on the loop: a cache hit in place, the first build off the loop."""
        found = self._instances.get(tool.tool_id)
        if found is not None and found[0] is tool:
            return found[1], found[2]
        # the first call imports the framework and the tool's module: off the loop
        return await run_in_worker(self.instance, tool)

    def forget(self, tool_id: str | None = None) -> None:
        with self._lock:
            forget_entries(self._instances, tool_id)


def framework_class(module: str, name: str, feature: str) -> type:
    """The framework's class `module.name`, imported now.

    Raises:
        ToolConfigError: the framework is not installed; the message names the extra that brings it.
    """
    try:
        cls: type = getattr(require(module, feature), name)
    except MissingExtraError as exc:
        raise ToolConfigError(str(exc), field="tool_type") from exc
    return cls
