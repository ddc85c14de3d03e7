"""Helpers of NodeMapper: the config keys each canvas node type reads, and its type metadata (HITL, API,
MCP, and the blocks kept verbatim), with problems reported as `Diagnostic`s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from workflow_bridge.canvas.entries import Diagnostics, json_copy
from workflow_bridge.canvas.mcp_entries import match_mcp_tool

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
# node type -> (metadata key, canvas config keys kept verbatim)
_PLAIN_BLOCKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Loop": (
        "loop_config",
        ("loopType", "arrayVariable", "itemVariable", "maxIterations", "condition", "count"),
    ),
    "Map": ("map_config", ("operation", "maxConcurrency", "arrayVariable", "itemVariable")),
    "Template": ("template_config", ("template", "engine")),
    "Failsafe": ("failsafe_config", ("retryAttempts", "timeout")),
    "Merge": ("merge_config", ("mergeStrategy", "strategy", "waitForAll")),
    "Subagent": ("subagent_config", ("targetAgentId", "task")),
    "Start": ("start_config", ("triggerType",)),
}
# keys every node type reads into the agent's top-level fields
COMMON_KEYS = frozenset(
    {"prompt", "model", "tools", "tools_exclude", "toolsExclude", "maxIterations", "temperature", "maxTokens"}
    | {"topP", "role", "goal", "description", "inputVariables", "outputVariables", "timeoutSeconds"}
    | {"baseUrl", "base_url"}
)
_TYPE_KEYS = {
    "Conditional": {"branches"},
    "HITL": {"title", "reviewTitle", "message", "priority", "allowEdit", "allowDefer", "allowedDecisions"}
    | {"notificationChannels"},
    "API": {"method", "url", "headers", "auth", "authentication", "body", "query", "timeout"},
    "MCP": {"serverId", "serverName", "operation", "operationName", "toolName", "customUrl", "arguments"},
    "Code": {"language", "code", "packages"},
    "Self-Review": {"checkCompleteness", "checkAccuracy", "checkTone", "confidenceThreshold", "minConfidence"}
    | {"reviewPrompt"},
}


def check_flow_nodes(
    workflow: Mapping[str, Any],
    agents: Mapping[str, Mapping[str, Any]],
    canvas_keys: Mapping[str, str],
    diags: Diagnostics,
) -> None:
    """Report, at save time, the Loop / Map / Failsafe / Self-Review / Template config the compiler would
    refuse (the same checks, `workflow_bridge.flow_config`). A template variable the canvas does not
    declare is a warning here: a run's input may still bring it (the compile checks it against that).

    Args:
        canvas_keys: agent id -> canvas node id (what the diagnostics name).
    """
    from workflow_bridge import flow_config
    from workflow_bridge.state import state_keys

    declared = flow_config.declared_types(workflow, agents)
    checks: dict[str, Any] = {
        "Loop": lambda a: flow_config.loop_config(a, declared),
        "Map": lambda a: flow_config.map_config(a, declared),
        "Failsafe": flow_config.failsafe_config,
        "Self-Review": flow_config.review_config,
    }
    extra: list[str] = []
    templates = []
    for agent_id, agent in agents.items():
        kind = (agent.get("metadata") or {}).get("node_type")
        try:
            if kind in checks:
                config = checks[kind](agent)
                extra.extend(v for v in (getattr(config, "item", None), getattr(config, "array", None)) if v)
            elif kind == "Template":
                templates.append(agent_id)
        except flow_config.NodeConfigError as exc:
            diags.error(canvas_keys.get(agent_id, agent_id), exc.field, str(exc))
    if templates:
        from workflow_bridge.template_node import check_template

        known = state_keys(workflow, agents, extra)
        for agent_id in templates:
            try:
                check_template(agents[agent_id], known)
            except flow_config.NodeConfigError as exc:
                add = diags.warning if exc.unknown else diags.error
                add(canvas_keys.get(agent_id, agent_id), exc.field, str(exc))


def consumed_keys(node_type: str) -> frozenset[str]:
    """The config keys the mapper turns into agent fields for `node_type`; the rest go to `canvas_extra`."""
    plain = _PLAIN_BLOCKS.get(node_type, ("", ()))[1]
    return COMMON_KEYS | _TYPE_KEYS.get(node_type, set()) | set(plain)


def type_metadata(
    node_type: str,
    config: Mapping[str, Any],
    node_id: str,
    diags: Diagnostics,
    registry: ToolRegistry | None,
) -> dict[str, Any]:
    """The `metadata.<type>_config` blocks EchoAI keeps for a node, read from the real canvas keys."""
    if node_type in _PLAIN_BLOCKS:
        key, names = _PLAIN_BLOCKS[node_type]
        block = {k: json_copy(config[k]) for k in names if k in config}
        return {key: block} if block or node_type != "Start" else {}
    if node_type == "HITL":
        return {"hitl_config": _hitl(config)}
    if node_type == "API":
        return {"api_config": _api(config, node_id, diags)}
    if node_type == "MCP":
        return {"mcp_config": _mcp(config, node_id, diags, registry)}
    if node_type == "Code":
        code = {"language": config.get("language") or "python", "code": config.get("code") or ""}
        code["packages"] = list(config.get("packages") or [])
        if not str(code["code"]).strip():
            diags.warning(node_id, "config.code", "the Code node has no code")
        if str(code["language"]).lower() != "python":
            diags.warning(node_id, "config.language", f"only python code runs; got {code['language']!r}")
        return {"code_config": code}
    if node_type == "Self-Review":
        review = {
            "checkCompleteness": config.get("checkCompleteness", True),
            "checkAccuracy": config.get("checkAccuracy", True),
            "confidenceThreshold": config.get("confidenceThreshold", config.get("minConfidence", 0.8)),
        }
        for extra in ("checkTone", "reviewPrompt", "maxIterations"):
            if extra in config:
                review[extra] = config[extra]
        return {"review_config": review}
    return {}


def _hitl(config: Mapping[str, Any]) -> dict[str, Any]:
    hitl = {
        "title": config.get("title") or config.get("reviewTitle") or "",
        "message": config.get("message") or "",
        "priority": config.get("priority") or "medium",
        "allowEdit": config.get("allowEdit", True),
        "allowDefer": config.get("allowDefer", False),
    }
    for extra in ("allowedDecisions", "notificationChannels"):
        if extra in config:
            hitl[extra] = json_copy(config[extra])
    return hitl


def _api(config: Mapping[str, Any], node_id: str, diags: Diagnostics) -> dict[str, Any]:
    method = str(config.get("method") or "GET").upper()
    url = config.get("url")
    auth = config.get("auth")
    if not isinstance(auth, Mapping):
        auth = {"type": config["authentication"]} if config.get("authentication") else {}
    api: dict[str, Any] = {
        "method": method,
        "url": url,
        "headers": json_copy(config.get("headers") or {}),
    }
    api["auth"] = json_copy(dict(auth))
    for extra in ("body", "query", "timeout"):
        if config.get(extra) is not None:
            api[extra] = json_copy(config[extra])
    if method not in HTTP_METHODS:
        diags.error(
            node_id, "config.method", f"API method {method!r} is not one of {', '.join(HTTP_METHODS)}"
        )
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
    except ValueError:  # e.g. an unclosed IPv6 bracket
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        diags.error(node_id, "config.url", f"the API node needs an http(s) url, got {url!r}")
    if not isinstance(api["headers"], Mapping):
        diags.error(
            node_id, "config.headers", f"headers must map names to values, got {api['headers']!r:.80}"
        )
    return api


def _mcp(
    config: Mapping[str, Any], node_id: str, diags: Diagnostics, registry: ToolRegistry | None
) -> dict[str, Any]:
    # EchoAI read serverName/toolName, which the canvas never writes; the IDE's keys are serverId/operation.
    server = config.get("serverId") or config.get("serverName") or ""
    operation = config.get("operation") or config.get("operationName") or config.get("toolName") or ""
    mcp: dict[str, Any] = {
        "serverId": server,
        "operation": operation,
        "serverName": server,
        "toolName": operation,
    }
    if config.get("customUrl"):
        mcp["customUrl"] = config["customUrl"]
    if isinstance(config.get("arguments"), Mapping):
        mcp["arguments"] = json_copy(dict(config["arguments"]))
    if not server or not operation:
        diags.error(
            node_id,
            "config.serverId",
            f"the MCP node needs serverId and operation, got {server!r}, {operation!r}",
        )
        return mcp
    tool = match_mcp_tool(registry, server, operation)
    if tool is not None:
        mcp["tool_id"] = tool.tool_id
    else:
        diags.warning(
            node_id,
            "config.operation",
            f"no registered MCP tool serves operation {operation!r} of server {server!r}",
        )
    return mcp
