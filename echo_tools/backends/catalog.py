"""Which backend class runs each tool type, imported only when an executor first needs it.

Adding a tool type means a backend module and a line here; the executor never names tool types, and no
framework (crewai, langchain, mcp) loads before a tool of its type runs.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from echo_tools.errors import ToolConfigError
from echo_tools.models import ToolType

if TYPE_CHECKING:
    from echo_tools.backends.base import ToolBackend
    from echo_tools.executor import ToolExecutor

# tool type -> (module, class) of its backend
BACKENDS: dict[ToolType, tuple[str, str]] = {
    ToolType.LOCAL: ("echo_tools.backends.local", "LocalBackend"),
    ToolType.API: ("echo_tools.backends.http", "HttpBackend"),
    ToolType.MCP: ("echo_tools.backends.mcp", "MCPBackend"),
    ToolType.CREWAI: ("echo_tools.backends.crewai", "CrewAIBackend"),
    ToolType.LANGCHAIN: ("echo_tools.backends.langchain", "LangChainBackend"),
    ToolType.SKILL: ("echo_tools.backends.skill", "SkillBackend"),
}


def backend_class(kind: ToolType) -> Callable[[ToolExecutor], ToolBackend]:
    """The backend class of tool type `kind` (built as `BackendClass(executor)`), its module imported now.

    Raises:
        ToolConfigError: the backend module or class cannot be loaded.
    """
    module_name, class_name = BACKENDS[kind]
    try:
        cls: Callable[[ToolExecutor], ToolBackend] = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ToolConfigError(
            f"The backend for tool type {kind.value!r} ({module_name}.{class_name}) cannot be loaded: {exc}"
        ) from exc
    return cls
