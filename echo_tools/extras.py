"""Optional frameworks: which extra of `echo-tools` brings each, and the error that says how to install it.

`pip install echo-tools` is the core (registry, executor, MCP client, OpenAPI import, CLI). CrewAI,
LangGraph/LangChain, the HTTP server and PostgreSQL are extras; a feature that needs one imports it on first
use through `require`, so its absence is an `MissingExtraError` naming the extra, never a bare
`ModuleNotFoundError` from deep inside.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# top-level module -> the extra that installs it
EXTRA_OF = {
    "crewai": "crewai",
    "langchain": "langgraph",
    "langchain_core": "langgraph",
    "langgraph": "langgraph",
    "fastapi": "server",
    "sse_starlette": "server",
    "uvicorn": "server",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
}


class MissingExtraError(ImportError):
    """A feature needs an optional framework that is not installed; the message names the extra."""

    def __init__(self, feature: str, module: str, extra: str) -> None:
        super().__init__(
            f"{feature} needs {module!r}, which is not installed: pip install 'echo-tools[{extra}]' "
            "(or 'echo-tools[all]')",
            name=module,
        )
        self.extra = extra


def missing_extra(exc: ImportError, feature: str) -> ImportError:
    """`exc` as a `MissingExtraError` when the module it misses belongs to an extra, else `exc` itself."""
    if isinstance(exc, MissingExtraError):
        return exc
    top = (exc.name or "").split(".")[0]
    extra = EXTRA_OF.get(top)
    if not isinstance(exc, ModuleNotFoundError) or extra is None:
        return exc
    error = MissingExtraError(feature, top, extra)
    error.__cause__ = exc
    return error


def require(module: str, feature: str) -> ModuleType:
    """Import `module` for `feature`.

    Raises:
        MissingExtraError: the module (or one it needs) belongs to an extra that is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(exc, feature) from exc
