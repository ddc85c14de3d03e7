"""The HTTP API: the `/tools` routes as a FastAPI router (`make_router`) and app (`create_app`).

`app` builds them; one module per concern: `errors` (the error contract), `security` (key, Host, CORS),
`events` (SSE and metrics), `shapes` (response bodies), `history`, `planning`, `thirdparty`. Other
packages add routers through the entry-point group `echo_tools.routers` (the workflow bridge adds
`/workflows`). The names below load on first use, so the CLI can use `shapes` without importing FastAPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo_tools.api.app import ApiState, create_app, include_plugin_routers, make_router

__all__ = ["ApiState", "create_app", "include_plugin_routers", "make_router"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from echo_tools.api import app

        return getattr(app, name)
    raise AttributeError(f"module 'echo_tools.api' has no attribute {name!r}")
