"""Helpers of NodeMapper: canvas tool entries -> tool ids and bindings, per-node-type config, graph checks.

Kept apart from `node_mapper` so the mapper reads as one pass over nodes and connections; everything here
is a pure function of its arguments (plus registry look-ups) and reports problems as `Diagnostic`s.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from echo_tools.models import ToolStatus
from echo_tools.suggest import tool_hint
from workflow_bridge.canvas.code_entries import code_tool, has_code
from workflow_bridge.canvas.mcp_entries import match_mcp_tool, mcp_server_tool
from workflow_bridge.canvas.subworkflow_entries import SUBWORKFLOW_KINDS, subworkflow_tool

if TYPE_CHECKING:
    from echo_tools.models import ToolDef
    from echo_tools.registry import ToolRegistry

# EchoAI's fixed role per canvas node type (node_mapper L325-345), used when the node sets no role.
ROLE_BY_TYPE = {
    "Start": "Workflow entry point",
    "End": "Workflow exit point",
    "Agent": "Autonomous AI agent",
    "Subagent": "Specialist delegation",
    "Prompt": "Direct LLM call",
    "Conditional": "Conditional branching",
    "Loop": "Iteration logic",
    "Map": "Parallel execution",
    "Self-Review": "Quality validation",
    "HITL": "Human approval gate",
    "API": "HTTP request",
    "MCP": "MCP tool execution",
    "Code": "Code execution",
    "Template": "String templating",
    "Failsafe": "Error handling",
    "Merge": "Branch merging",
}
# icon and colour of the IDE's node library, for agents that come back to the canvas without a layout
LOOK_BY_TYPE = {
    "Start": ("▶️", "#10b981"),
    "End": ("⏹️", "#64748b"),
    "Agent": ("🔶", "#f59e0b"),
    "Conditional": ("🔀", "#8b5cf6"),
    "Merge": ("🖇️", "#8b5cf6"),
    "API": ("🌐", "#3b82f6"),
    "Code": ("💻", "#0ea5e9"),
    "HITL": ("👤", "#06b6d4"),
    "Self-Review": ("✅", "#06b6d4"),
}
TOOL_NODE_TYPES = frozenset({"Agent", "Subagent", "Prompt"})  # the node types EchoAI binds tools for
BUILTIN_TOOL_TYPES = frozenset({"code", "subworkflow", "subworkflow_deployment", "mcp_server"})
TEMPLATE_TOOL_TYPE = "tools"
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
_SCHEMA_KEYS = frozenset({"type", "properties", "$schema", "required", "additionalProperties"})


@dataclass(frozen=True)
class Diagnostic:
    """One problem found while mapping: `level` is "error" (the workflow cannot run) or "warning"."""

    level: Literal["error", "warning"]
    node_id: str | None
    field: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        """`{level, node_id, field, message}` (JSON-ready)."""
        return {"level": self.level, "node_id": self.node_id, "field": self.field, "message": self.message}

    def __str__(self) -> str:
        where = f"node {self.node_id}" if self.node_id is not None else "workflow"
        return f"{self.level}: {where}: {self.field or '-'}: {self.message}"


class Diagnostics(list[Diagnostic]):
    """A list of diagnostics with two shorthands."""

    def error(self, node_id: str | None, field: str | None, message: str) -> None:
        self.append(Diagnostic("error", node_id, field, message))

    def warning(self, node_id: str | None, field: str | None, message: str) -> None:
        self.append(Diagnostic("warning", node_id, field, message))


@dataclass
class ToolResolution:
    """What a node's `config.tools` resolved to: bound ids, per-entry bindings, wildcard exclusions."""

    tools: list[str] = field(default_factory=list)
    bindings: list[dict[str, Any]] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    diagnostics: Diagnostics = field(default_factory=Diagnostics)


# -- tool entries ------------------------------------------------------------------------------------


def resolve_tool_entries(
    registry: ToolRegistry | None,
    entries: Any,
    *,
    node_id: str | None = None,
    field: str = "config.tools",
    exclude: Iterable[Any] = (),
    node_name: str | None = None,
) -> ToolResolution:
    """Resolve a node's tool entries (any of EchoAI's five shapes) to tool ids and bindings.

    Args:
        registry: the catalogue names are looked up in (None: nothing is known).
        entries: `node.config.tools`: strings, registered-tool dicts, built-ins, template tools, `"*"`.
        node_id: named in diagnostics.
        field: the path of `entries`, named in diagnostics.
        exclude: tool references left out of a `"*"` wildcard.
        node_name: the node's name on the canvas, named in diagnostics with its id.

    Returns:
        The resolution; unknown tools are error diagnostics, never placeholder ids.
    """
    res = ToolResolution()
    if entries is None:
        return res
    if isinstance(entries, (str, Mapping)):
        entries = [entries]
    if not isinstance(entries, list):
        res.diagnostics.error(node_id, field, f"{field} must be a list of tools, got {entries!r:.80}")
        return res
    wildcard = False
    disabled: list[str] = []
    for index, entry in enumerate(entries):
        where = f"{field}[{index}]"
        if entry == "*" or (isinstance(entry, Mapping) and entry.get("tool_id") == "*"):
            wildcard = True
            continue
        binding = _resolve_entry(registry, entry, node_id, where, res.diagnostics, node_name)
        if binding is None:
            continue
        tool_id = binding["tool_id"]
        if any(b["tool_id"] == tool_id for b in res.bindings):
            res.diagnostics.warning(node_id, where, f"tool {tool_id!r} is listed twice; it is bound once")
            continue
        res.bindings.append(binding)
        if binding["enabled"] and not binding.pop("_inactive", False):
            res.tools.append(tool_id)
        else:
            binding.pop("_inactive", None)
            disabled.append(tool_id)
    if wildcard:
        res.tools = ["*"]
        if isinstance(exclude, str):
            exclude = [exclude]
        elif not isinstance(exclude, (list, tuple)):
            res.diagnostics.warning(
                node_id, "config.tools_exclude", f"tools_exclude must be a list of tools, got {exclude!r:.80}"
            )
            exclude = []
        for index, ref in enumerate(exclude):
            tool = registry.resolve(ref) if registry is not None and isinstance(ref, str) else None
            if tool is None:
                res.diagnostics.warning(
                    node_id, f"config.tools_exclude[{index}]", f"excluded tool {ref!r} is not in the registry"
                )
            elif tool.tool_id not in res.exclude:
                res.exclude.append(tool.tool_id)
        res.exclude.extend(t for t in disabled if t not in res.exclude and not t.startswith("builtin_"))
    return res


def _resolve_entry(
    registry: ToolRegistry | None,
    entry: Any,
    node_id: str | None,
    where: str,
    diags: Diagnostics,
    node_name: str | None = None,
) -> dict[str, Any] | None:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, Mapping):
        diags.error(node_id, where, f"a tool entry must be a tool name or an object, got {entry!r:.80}")
        return None
    # hand-written JSON sometimes says "false"; only an explicit false-like value disables an entry
    enabled = str(entry.get("enabled", True)).strip().lower() not in ("false", "0", "no", "off")
    kind = str(entry.get("type") or "").strip().lower()
    tool_ref, name = entry.get("tool_id") or entry.get("toolId"), entry.get("name")
    raw_config = as_dict(entry.get("config"))
    config = {k: json_copy(v) for k, v in raw_config.items() if k != "fixed"}

    label = tool_ref or name or entry.get("id")
    # an entry that names its tool by config (sub-workflow, code) binds by that, whatever its tool_id says
    by_config = kind in SUBWORKFLOW_KINDS or (kind == "code" and has_code(config))
    if kind in SUBWORKFLOW_KINDS:  # the workflow tool its workflowId names, or the reason it has none
        tool, problem = subworkflow_tool(registry, kind, config)
        key = ""
    elif by_config:  # a Code tool with code: main(**kwargs) is the tool
        tool, key, problem = code_tool(registry, config, name)
    else:
        tool, problem = _lookup(registry, tool_ref, name, entry.get("id")), ""
    if problem:
        field = f"{where}.config" + (f".{key}" if key else "")
        diags.error(node_id, field, f"Node {node_id!r}: tool entry {where} ({label or kind}): {problem}")
        return None
    if kind == "code" and tool is not None and not tool.input_schema.get("properties"):
        if tool.input_schema.get("additionalProperties"):  # strict function calling closes open schemas
            diags.warning(
                node_id,
                f"{where}.config.code",
                f"Node {node_id!r}: tool entry {where} ({label}): main(**kwargs) names no parameter, so the "
                "model cannot know what to pass: name them (def main(text: str)) or list them under Args: "
                "in main's docstring",
            )
    if (
        tool is not None
        and not by_config
        and isinstance(tool_ref, str)
        and tool_ref
        and tool.tool_id != tool_ref
    ):
        diags.warning(
            node_id,
            f"{where}.tool_id",
            f"tool_id {tool_ref!r} is unknown; bound {tool.tool_id!r} by its name",
        )
    if tool is None and kind not in BUILTIN_TOOL_TYPES:
        kind = _round_tripped_builtin(tool_ref, name) or kind  # before templates: it is typed as one
    if tool is None and kind == "mcp_server":  # the server's tool, its server added from serverUrl
        tool, key, problem = mcp_server_tool(registry, config)
        if tool is None:
            diags.error(
                node_id,
                f"{where}.config.{key}",
                f"Node {node_id!r}: tool entry {where} ({label or kind}): {problem}",
            )
            return None
    if tool is None and kind == TEMPLATE_TOOL_TYPE:  # {provider, action, credentials}: an imported tool
        from echo_tools.openapi import template_tool

        def report(level: str, field: str, message: str) -> None:
            add = diags.warning if level == "warning" else diags.error
            add(node_id, f"{where}.config.{field}", f"Node {node_id!r}: tool {label!r}: {message}")

        tool = template_tool(registry, config, report)
        if tool is None:
            return None
    if tool is None and kind in BUILTIN_TOOL_TYPES:
        _check_builtin(kind, config, node_id, where, diags)
        return _binding(f"builtin_{kind}", name or kind, kind, enabled, _fixed_of(entry), config, entry)
    if tool is None:
        level = diags.error if enabled else diags.warning
        node = f"Node {node_name!r} (id {node_id!r})" if node_name else f"Node {node_id!r}"
        hint = tool_hint(registry, label) if registry is not None else ""
        level(
            node_id,
            where,
            f"{node}: tool {label!r} is not in the tool registry"
            + ("" if enabled else " (it is disabled on the node, so nothing is bound)")
            + hint,
        )
        return None

    fixed = _fixed_of(entry)
    if kind not in BUILTIN_TOOL_TYPES and kind != TEMPLATE_TOOL_TYPE:
        if _looks_like_schema(config):
            config = {}  # the IDE copies the tool's input_schema into config: not a setting
        else:
            props = tool.input_schema.get("properties") or {}
            for key in [k for k in config if k in props]:
                fixed[key] = config.pop(key)  # a parameter value set on the node
    _check_fixed(tool, fixed, node_id, f"{where}.fixed", diags)
    shown_type = kind if kind in BUILTIN_TOOL_TYPES or kind == TEMPLATE_TOOL_TYPE else tool.tool_type.value
    shown_name = name if by_config and isinstance(name, str) and name else tool.name
    binding = _binding(tool.tool_id, shown_name, shown_type, enabled, fixed, config, entry)
    # The IDE copies the tool's description into every entry it adds, so `description` is a snapshot, not a
    # choice: honouring it would pin an outdated text once the tool's own description changes. An override
    # is asked for explicitly.
    description = entry.get("description_override")
    if isinstance(description, str) and description.strip() and description != tool.description:
        binding["description"] = description
    if tool.status == ToolStatus.DISABLED:
        diags.warning(node_id, where, f"tool {tool.tool_id!r} is disabled in the registry; it is not bound")
        binding["_inactive"] = True
    elif tool.status == ToolStatus.DEPRECATED:
        diags.warning(node_id, where, f"tool {tool.tool_id!r} is deprecated")
    return binding


def _round_tripped_builtin(*refs: Any) -> str | None:
    """The built-in type of an entry EchoAI's reverse mapper made from a `builtin_<type>` id: it titles
    the id into the name ("Builtin Code") and types the entry as a template (`tools`, empty config), so a
    reopened canvas could not be saved again."""
    for ref in refs:
        if isinstance(ref, str):
            slug = "_".join("".join(c if c.isalnum() else " " for c in ref.lower()).split())
            if slug.startswith("builtin_") and slug[len("builtin_") :] in BUILTIN_TOOL_TYPES:
                return slug[len("builtin_") :]
    return None


def _lookup(registry: ToolRegistry | None, *refs: Any) -> ToolDef | None:
    if registry is None:
        return None
    for ref in refs:
        if isinstance(ref, str) and ref.strip():
            tool = registry.resolve(ref.strip())
            if tool is not None:
                return tool
    return None


def _check_builtin(
    kind: str, config: dict[str, Any], node_id: str | None, where: str, diags: Diagnostics
) -> None:
    if kind == "code" and str(config.get("language") or "python").lower() != "python":
        diags.warning(
            node_id, f"{where}.config.language", f"only python code runs; got {config.get('language')!r}"
        )


def _binding(
    tool_id: str,
    name: str,
    kind: str,
    enabled: bool,
    fixed: dict[str, Any],
    config: dict[str, Any],
    entry: Mapping[str, Any],
) -> dict[str, Any]:
    binding: dict[str, Any] = {
        "tool_id": tool_id,
        "name": name,
        "type": kind,
        "enabled": enabled,
        "fixed": fixed,
        "config": config,
    }
    if entry.get("id") is not None:
        binding["entry_id"] = entry["id"]
    return binding


def _fixed_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    fixed: dict[str, Any] = {}
    config = entry.get("config")
    for source in (entry.get("fixed"), config.get("fixed") if isinstance(config, Mapping) else None):
        if isinstance(source, Mapping):
            fixed.update({k: json_copy(v) for k, v in source.items() if v is not None})
    return fixed


def _looks_like_schema(config: Mapping[str, Any]) -> bool:
    return bool(config) and (config.get("type") == "object" or bool(_SCHEMA_KEYS & set(config) - {"type"}))


def _check_fixed(
    tool: ToolDef, fixed: dict[str, Any], node_id: str | None, where: str, diags: Diagnostics
) -> None:
    if not fixed:
        return
    import jsonschema  # only when a node fixes parameters

    props = tool.input_schema.get("properties") or {}
    closed = tool.input_schema.get("additionalProperties") is False
    for key, value in fixed.items():
        prop = props.get(key)
        if prop is None:
            message = f"tool {tool.tool_id!r} has no parameter {key!r}"
            if closed:
                diags.error(node_id, f"{where}.{key}", message)
            else:
                diags.warning(node_id, f"{where}.{key}", message)
            continue
        if not isinstance(prop, Mapping):
            continue
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(dict(prop)).iter_errors(value)
        )
        if error is not None:
            diags.error(
                node_id,
                f"{where}.{key}",
                f"fixed value {value!r:.80} for {tool.tool_id!r} parameter {key!r} is invalid: {error.message}",
            )


# -- per-node-type configuration -----------------------------------------------------------------------

# node type -> (metadata key, canvas config keys kept verbatim)
_PLAIN_BLOCKS: dict[str, tuple[str, tuple[str, ...]]] = {
    "Loop": ("loop_config", ("loopType", "arrayVariable", "itemVariable", "maxIterations")),
    "Map": ("map_config", ("operation", "maxConcurrency")),
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
        for extra in ("checkTone", "reviewPrompt"):
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


def as_dict(value: Any) -> dict[str, Any]:
    """`value` as a dict when it is a mapping, else an empty dict (canvas JSON is often loosely shaped)."""
    return dict(value) if isinstance(value, Mapping) else {}


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (through the C JSON codec: several times faster than `copy.deepcopy`)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):  # not plain JSON (e.g. a tuple key): fall back to the general copy
        return copy.deepcopy(value)
