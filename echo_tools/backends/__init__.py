"""One backend per tool type, and the registration-time check of each type's `execution_config`.

The checks here import nothing heavy and never import the module a config names.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from echo_tools.backends.base import BackendOutput, ToolBackend, check_python_target, module_allowed
from echo_tools.egress import check_tool_headers
from echo_tools.errors import EgressDeniedError, ToolRegistrationError
from echo_tools.models import ToolType

if TYPE_CHECKING:
    from echo_tools.egress import EgressPolicy
    from echo_tools.models import ToolDef

__all__ = ["BackendOutput", "ToolBackend", "check_execution_config", "module_allowed"]

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "TRACE")


def _fail(tool: ToolDef, field: str, message: str) -> ToolRegistrationError:
    return ToolRegistrationError(f"Tool {tool.tool_id!r}: {message}", tool_id=tool.tool_id, field=field)


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
        raise _fail(tool, "execution_config", f"execution_config must be an object, got {config!r}")
    kind = tool.tool_type
    if kind == ToolType.LOCAL and not config:
        return  # EchoAI's legacy {name, description} form: a catalogue entry that cannot run yet
    if kind == ToolType.LOCAL:
        check_python_target(tool, allowed_modules, kinds=("class", "function"))
        if "class" in config and "method" not in config:
            raise _fail(
                tool, "execution_config.method", "execution_config.class needs execution_config.method"
            )
    elif kind in (ToolType.CREWAI, ToolType.LANGCHAIN):
        check_python_target(tool, allowed_modules, kinds=("class", "factory"))
    elif kind == ToolType.API:
        _check_api(tool, egress)
    elif kind == ToolType.MCP:
        _check_mcp(tool)
    elif kind == ToolType.SKILL:
        from echo_tools.skills import parse_skill

        parse_skill(tool.tool_id, config)
    elif kind in (ToolType.WORKFLOW, ToolType.AGENT):
        _check_stored_ref(tool)
    elif kind == ToolType.CODE:
        from echo_tools.code_tools import check_code_config

        check_code_config(tool)


def _check_api(tool: ToolDef, egress: EgressPolicy | None) -> None:
    config = tool.execution_config
    url = config.get("url")
    if not isinstance(url, str) or not url:
        raise _fail(tool, "execution_config.url", f"execution_config.url must be an http(s) URL, got {url!r}")
    parts = urlsplit(url.replace("{", "").replace("}", ""))
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise _fail(tool, "execution_config.url", f"execution_config.url must be an http(s) URL, got {url!r}")
    if "{" in parts.netloc or "{" in urlsplit(url).netloc:
        raise _fail(tool, "execution_config.url", f"execution_config.url may not template the host: {url!r}")
    method = str(config.get("method", "POST")).upper()
    if method not in HTTP_METHODS:
        raise _fail(
            tool,
            "execution_config.method",
            f"execution_config.method {method!r} is not one of {HTTP_METHODS}",
        )
    for key in ("headers", "query"):
        value = config.get(key, {})
        if not isinstance(value, dict) or not all(isinstance(v, (str, int, float)) for v in value.values()):
            raise _fail(tool, f"execution_config.{key}", f"execution_config.{key} must map names to strings")
    check_tool_headers(tool)  # no Host, Content-Length, Transfer-Encoding, Connection or hop-by-hop header
    timeout = config.get("timeout")
    if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
        raise _fail(
            tool, "execution_config.timeout", f"execution_config.timeout must be positive, got {timeout!r}"
        )
    if egress is not None:
        try:
            egress.check_url(url)
        except EgressDeniedError as exc:
            raise _fail(tool, "execution_config.url", str(exc)) from exc


def _check_stored_ref(tool: ToolDef) -> None:
    """A `workflow` tool names `{workflow_id, version?}`; an `agent` tool `{agent_id}`: safe ids, never paths."""
    from echo_tools.stores import VERSION_PATTERN, check_store_id

    config = tool.execution_config
    key = "workflow_id" if tool.tool_type == ToolType.WORKFLOW else "agent_id"
    try:
        check_store_id(config.get(key), key)
    except ValueError as exc:
        raise _fail(tool, f"execution_config.{key}", f"execution_config.{exc}") from None
    version = config.get("version")
    if (
        key == "workflow_id"
        and version is not None
        and not (isinstance(version, str) and VERSION_PATTERN.fullmatch(version))
    ):
        raise _fail(
            tool, "execution_config.version", f"execution_config.version {version!r} is not a version"
        )


def _check_mcp(tool: ToolDef) -> None:
    config = tool.execution_config
    if "connector_id" in config:
        if not isinstance(config["connector_id"], str) or not config["connector_id"]:
            raise _fail(
                tool, "execution_config.connector_id", "execution_config.connector_id must be a string"
            )
        return
    server, name = config.get("server"), config.get("tool")
    if not isinstance(server, str) or not server or not isinstance(name, str) or not name:
        raise _fail(
            tool,
            "execution_config",
            f"an mcp tool needs execution_config {{server, tool}} or {{connector_id}}, got {config!r}",
        )
