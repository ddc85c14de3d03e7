"""Which backend class runs each tool type, imported only when an executor first needs it.

Adding a tool type means a backend module and a line here; the executor never names tool types, and no
framework (crewai, langchain, mcp) loads before a tool of its type runs. Types whose backends live in
another package (`workflow` and `agent`, run by `workflow_bridge`) are plugged in through the entry-point
group `echo_tools.backends`, so echo_tools never imports that package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from echo_tools.errors import ToolConfigError
from echo_tools.models import ToolType

if TYPE_CHECKING:
    from echo_tools.backends.base import ToolBackend

# tool type -> (module, class) of its backend
BACKENDS: dict[ToolType, tuple[str, str]] = {
    ToolType.LOCAL: ("echo_tools.backends.local", "LocalBackend"),
    ToolType.API: ("echo_tools.backends.http", "HttpBackend"),
    ToolType.MCP: ("echo_tools.backends.mcp", "MCPBackend"),
    ToolType.CREWAI: ("echo_tools.backends.crewai", "CrewAIBackend"),
    ToolType.LANGCHAIN: ("echo_tools.backends.langchain", "LangChainBackend"),
    ToolType.SKILL: ("echo_tools.backends.skill", "SkillBackend"),
    ToolType.CODE: ("echo_tools.backends.code", "CodeBackend"),
}


def backend_class(kind: ToolType) -> type[ToolBackend]:
    """The backend class of tool type `kind` (built as `BackendClass(executor)`), its module imported now.

    Raises:
        ToolConfigError: the backend module or class cannot be loaded.
    """
    if kind not in BACKENDS:
        return _plugged_in(kind)
    module_name, class_name = BACKENDS[kind]
    try:
        cls: type[ToolBackend] = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ToolConfigError(
            f"The backend for tool type {kind.value!r} ({module_name}.{class_name}) cannot be loaded: {exc}"
        ) from exc
    return cls


ENTRY_POINT_GROUP = "echo_tools.backends"


def _plugged_in(kind: ToolType) -> type[ToolBackend]:
    from importlib.metadata import entry_points

    found = entry_points(group=ENTRY_POINT_GROUP, name=kind.value)
    if not found:
        raise ToolConfigError(
            f"No backend runs tool type {kind.value!r}: none is built in and no package declares one in the "
            f"entry-point group {ENTRY_POINT_GROUP!r} (reinstall echo-tools: `make install`)"
        )
    entry = next(iter(found))
    try:
        cls: type[ToolBackend] = entry.load()
    except (ImportError, AttributeError) as exc:
        raise ToolConfigError(
            f"The backend for tool type {kind.value!r} ({entry.value}) cannot be loaded: {exc}"
        ) from exc
    return cls
