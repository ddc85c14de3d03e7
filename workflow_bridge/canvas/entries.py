"""Helpers of NodeMapper: canvas tool entries -> tool ids and bindings (per-node-type config: `node_config`).

Kept apart from `node_mapper` so the mapper reads as one pass over nodes and connections; everything here
is a pure function of its arguments (plus registry look-ups) and reports problems as `Diagnostic`s.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from echo_tools.models import ToolStatus
from echo_tools.suggest import tool_hint
from workflow_bridge.canvas.code_entries import code_tool, has_code
from workflow_bridge.canvas.mcp_entries import mcp_server_tool
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


@dataclass
class _Entry:
    """One canvas tool entry being resolved, with where it is (for diagnostics)."""

    registry: ToolRegistry | None
    entry: Mapping[str, Any]
    node_id: str | None
    where: str
    diags: Diagnostics
    node_name: str | None
    enabled: bool
    kind: str
    tool_ref: Any
    name: Any
    config: dict[str, Any]
    label: Any
    by_config: bool  # named by its config (sub-workflow, code), whatever its tool_id says

    def error(self, key: str, problem: str) -> None:
        field = f"{self.where}.config" + (f".{key}" if key else "")
        message = f"Node {self.node_id!r}: tool entry {self.where} ({self.label or self.kind}): {problem}"
        self.diags.error(self.node_id, field, message)


def _resolve_entry(
    registry: ToolRegistry | None,
    entry: Any,
    node_id: str | None,
    where: str,
    diags: Diagnostics,
    node_name: str | None = None,
) -> dict[str, Any] | None:
    e = _read_entry(registry, entry, node_id, where, diags, node_name)
    if e is None:
        return None
    # a registry tool (then bound), a finished binding (built-ins), None (not found) or False (reported)
    found: ToolDef | dict[str, Any] | Literal[False] | None
    found = _FOUND_BY[e.kind](e) if e.kind in _FOUND_BY else _lookup_entry(e)
    if found is False:
        return None
    if found is None and e.kind not in BUILTIN_TOOL_TYPES:
        e.kind = _round_tripped_builtin(e.tool_ref, e.name) or e.kind  # before templates: it is typed as one
    if found is None:
        found = _WHEN_NOT_FOUND.get(e.kind, _not_in_registry)(e)
    if found is None or isinstance(found, dict):
        return found
    return _bind(e, found)


def _read_entry(
    registry: ToolRegistry | None,
    entry: Any,
    node_id: str | None,
    where: str,
    diags: Diagnostics,
    node_name: str | None,
) -> _Entry | None:
    if isinstance(entry, str):
        entry = {"name": entry}
    if not isinstance(entry, Mapping):
        diags.error(node_id, where, f"a tool entry must be a tool name or an object, got {entry!r:.80}")
        return None
    # hand-written JSON sometimes says "false"; only an explicit false-like value disables an entry
    enabled = str(entry.get("enabled", True)).strip().lower() not in ("false", "0", "no", "off")
    kind = str(entry.get("type") or "").strip().lower()
    tool_ref, name = entry.get("tool_id") or entry.get("toolId"), entry.get("name")
    config = {k: json_copy(v) for k, v in as_dict(entry.get("config")).items() if k != "fixed"}
    by_config = kind in SUBWORKFLOW_KINDS or (kind == "code" and has_code(config))
    label = tool_ref or name or entry.get("id")
    return _Entry(
        registry,
        entry,
        node_id,
        where,
        diags,
        node_name,
        enabled,
        kind,
        tool_ref,
        name,
        config,
        label,
        by_config,
    )


def _subworkflow_entry(e: _Entry) -> ToolDef | Literal[False] | None:
    """The workflow tool its workflowId names, or False with the reason it has none reported."""
    tool, problem = subworkflow_tool(e.registry, e.kind, e.config)
    if problem:
        e.error("", problem)
        return False
    return tool


def _code_entry(e: _Entry) -> ToolDef | Literal[False] | None:
    """A Code tool with code: main(**kwargs) is the tool; without code, the registry's tool it names."""
    if e.by_config:
        tool, key, problem = code_tool(e.registry, e.config, e.name)
        if problem:
            e.error(key, problem)
            return False
    else:
        tool = _lookup(e.registry, e.tool_ref, e.name, e.entry.get("id"))
    if tool is not None and not tool.input_schema.get("properties"):
        if tool.input_schema.get("additionalProperties"):  # strict function calling closes open schemas
            e.diags.warning(
                e.node_id,
                f"{e.where}.config.code",
                f"Node {e.node_id!r}: tool entry {e.where} ({e.label}): main(**kwargs) names no parameter, so "
                "the model cannot know what to pass: name them (def main(text: str)) or list them under Args: "
                "in main's docstring",
            )
    return tool if e.by_config else _warn_bound_by_name(e, tool)


def _lookup_entry(e: _Entry) -> ToolDef | None:
    """The registry's tool by tool_id, else name, else id (a tool_id found by name is warned about)."""
    return _warn_bound_by_name(e, _lookup(e.registry, e.tool_ref, e.name, e.entry.get("id")))


def _warn_bound_by_name(e: _Entry, tool: ToolDef | None) -> ToolDef | None:
    if tool is not None and isinstance(e.tool_ref, str) and e.tool_ref and tool.tool_id != e.tool_ref:
        e.diags.warning(
            e.node_id,
            f"{e.where}.tool_id",
            f"tool_id {e.tool_ref!r} is unknown; bound {tool.tool_id!r} by its name",
        )
    return tool


def _mcp_server_entry(e: _Entry) -> ToolDef | None:
    """The server's tool, its server added from serverUrl."""
    tool, key, problem = mcp_server_tool(e.registry, e.config)
    if tool is None:
        message = f"Node {e.node_id!r}: tool entry {e.where} ({e.label or e.kind}): {problem}"
        e.diags.error(e.node_id, f"{e.where}.config.{key}", message)
    return tool


def _template_entry(e: _Entry) -> ToolDef | None:
    """{provider, action, credentials}: an imported tool."""
    from echo_tools.openapi import template_tool

    def report(level: str, field: str, message: str) -> None:
        add = e.diags.warning if level == "warning" else e.diags.error
        add(e.node_id, f"{e.where}.config.{field}", f"Node {e.node_id!r}: tool {e.label!r}: {message}")

    return template_tool(e.registry, e.config, report)


def _builtin_entry(e: _Entry) -> dict[str, Any]:
    _check_builtin(e.kind, e.config, e.node_id, e.where, e.diags)
    return _binding(
        f"builtin_{e.kind}", e.name or e.kind, e.kind, e.enabled, _fixed_of(e.entry), e.config, e.entry
    )


def _not_in_registry(e: _Entry) -> None:
    level = e.diags.error if e.enabled else e.diags.warning
    node = f"Node {e.node_name!r} (id {e.node_id!r})" if e.node_name else f"Node {e.node_id!r}"
    hint = tool_hint(e.registry, e.label) if e.registry is not None else ""
    level(
        e.node_id,
        e.where,
        f"{node}: tool {e.label!r} is not in the tool registry"
        + ("" if e.enabled else " (it is disabled on the node, so nothing is bound)")
        + hint,
    )


# how an entry's tool is found, by its type (the rest: the registry's tool it names)
_FOUND_BY: dict[str, Callable[[_Entry], ToolDef | Literal[False] | None]] = {
    "code": _code_entry,
    **{kind: _subworkflow_entry for kind in SUBWORKFLOW_KINDS},
}
# what an entry whose tool was not found is, by its type (the rest: an error, not in the registry)
_WHEN_NOT_FOUND: dict[str, Callable[[_Entry], ToolDef | dict[str, Any] | None]] = {
    "mcp_server": _mcp_server_entry,
    TEMPLATE_TOOL_TYPE: _template_entry,
    **{kind: _builtin_entry for kind in BUILTIN_TOOL_TYPES - {"mcp_server"}},
}


def _bind(e: _Entry, tool: ToolDef) -> dict[str, Any]:
    """The binding of a found tool: parameter values set on the node become fixed arguments."""
    fixed, config, kind = _fixed_of(e.entry), e.config, e.kind
    if kind not in BUILTIN_TOOL_TYPES and kind != TEMPLATE_TOOL_TYPE:
        if _looks_like_schema(config):
            config = {}  # the IDE copies the tool's input_schema into config: not a setting
        else:
            props = tool.input_schema.get("properties") or {}
            for key in [k for k in config if k in props]:
                fixed[key] = config.pop(key)  # a parameter value set on the node
    _check_fixed(tool, fixed, e.node_id, f"{e.where}.fixed", e.diags)
    shown_type = kind if kind in BUILTIN_TOOL_TYPES or kind == TEMPLATE_TOOL_TYPE else tool.tool_type.value
    shown_name = e.name if e.by_config and isinstance(e.name, str) and e.name else tool.name
    binding = _binding(tool.tool_id, shown_name, shown_type, e.enabled, fixed, config, e.entry)
    # The IDE copies the tool's description into every entry it adds, so `description` is a snapshot, not a
    # choice: honouring it would pin an outdated text once the tool's own description changes. An override
    # is asked for explicitly.
    description = e.entry.get("description_override")
    if isinstance(description, str) and description.strip() and description != tool.description:
        binding["description"] = description
    if tool.status == ToolStatus.DISABLED:
        e.diags.warning(
            e.node_id, e.where, f"tool {tool.tool_id!r} is disabled in the registry; it is not bound"
        )
        binding["_inactive"] = True
    elif tool.status == ToolStatus.DEPRECATED:
        e.diags.warning(e.node_id, e.where, f"tool {tool.tool_id!r} is deprecated")
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


def as_dict(value: Any) -> dict[str, Any]:
    """`value` as a dict when it is a mapping, else an empty dict (canvas JSON is often loosely shaped)."""
    return dict(value) if isinstance(value, Mapping) else {}


def json_copy(value: Any) -> Any:
    """A deep copy of JSON data (through the C JSON codec: several times faster than `copy.deepcopy`)."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):  # not plain JSON (e.g. a tuple key): fall back to the general copy
        return copy.deepcopy(value)
