"""One backend per tool type; each checks its own `execution_config` at registration (`check_config`).

`check_execution_config` hands a definition to its type's backend class; nothing here knows the types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from echo_tools.backends.base import (
    BackendHost,
    BackendOutput,
    HostCatalogue,
    ToolBackend,
    config_error,
    module_allowed,
)
from echo_tools.backends.catalog import backend_class
from echo_tools.errors import ToolConfigError
from echo_tools.models import ToolType

if TYPE_CHECKING:
    from echo_tools.egress import EgressPolicy
    from echo_tools.models import ToolDef

__all__ = [
    "BackendHost",
    "BackendOutput",
    "HostCatalogue",
    "ToolBackend",
    "check_execution_config",
    "check_stored_ref",
    "module_allowed",
]


def check_execution_config(
    tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
) -> None:
    """Raise `ToolRegistrationError` naming the field when `tool.execution_config` is unusable or unsafe.

    Args:
        tool: the definition being registered.
        allowed_modules: packages that `local`, `crewai` and `langchain` tools may name.
        egress: when given, an `api` tool's literal host must pass it (host names are checked at call time).
    """
    config = tool.execution_config
    if not isinstance(config, dict):
        raise config_error(tool, "execution_config", f"execution_config must be an object, got {config!r}")
    try:
        backend = backend_class(ToolType(tool.tool_type))
    except ToolConfigError as exc:  # a type whose backend is not installed cannot be registered
        raise config_error(tool, "tool_type", exc.message) from exc
    backend.check_config(tool, allowed_modules, egress)


def check_stored_ref(tool: ToolDef) -> None:
    """A `workflow` tool names `{workflow_id, version?}` or `{deployment_id, environment?}`; an `agent` tool
    `{agent_id}`: safe ids, never paths."""
    from echo_tools.stores import ENVIRONMENT_PATTERN, VERSION_PATTERN, check_store_id

    config = tool.execution_config
    key = "workflow_id" if tool.tool_type == ToolType.WORKFLOW else "agent_id"
    if key == "workflow_id" and "deployment_id" in config and "workflow_id" not in config:
        key = "deployment_id"
        environment = config.get("environment")
        if environment is not None and not (
            isinstance(environment, str) and ENVIRONMENT_PATTERN.fullmatch(environment)
        ):
            raise config_error(
                tool,
                "execution_config.environment",
                f"execution_config.environment {environment!r} is not an environment",
            )
    try:
        check_store_id(config.get(key), key)
    except ValueError as exc:
        raise config_error(tool, f"execution_config.{key}", f"execution_config.{exc}") from None
    version = config.get("version")
    if (
        key == "workflow_id"
        and version is not None
        and not (isinstance(version, str) and VERSION_PATTERN.fullmatch(version))
    ):
        raise config_error(
            tool, "execution_config.version", f"execution_config.version {version!r} is not a version"
        )
