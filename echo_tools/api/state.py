"""`ApiState`: what every router of the HTTP API shares, declared below the routers that read it.

`app` builds it once per router (`make_router`); `planning`, `thirdparty`, `ui` and the workflow bridge's
`/workflows` routes receive it. Its home is this module so that those routers never depend on `app`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo_tools.api.events import EventBroadcaster
    from echo_tools.api.security import Gatekeeper
    from echo_tools.executor import ToolExecutor
    from echo_tools.gate import Principal
    from echo_tools.registry import ToolRegistry
    from echo_tools.settings import ApiSettings

__all__ = ["ApiState"]


@dataclass
class ApiState:
    """What the routes share: the catalogue, the executor, the settings, the event fan-out and the gate
    (`gate.requires(action)`: the dependency every route, in any router, declares)."""

    registry: ToolRegistry
    executor: ToolExecutor
    settings: ApiSettings
    broadcaster: EventBroadcaster
    gate: Gatekeeper
    history: Any = None  # the run history (`/workflows` records and resumes runs in it), when kept
    run_pool: Any = None  # the workflow runs' own worker threads (`/workflows`), reported by health
    # set by the workflow bridge's router: carry a paused recorded run on (`POST /tools/approvals/{id}`)
    run_resumer: Callable[[str, Any, Principal], Awaitable[dict[str, Any] | None]] | None = None
