"""Trust rules: what a definition may do, decided by where it came from (`ToolDef.source`).

A `remote` definition (registered over HTTP) may not name new code: a Python-backed one must point at an
entry point that a discovered manifest declares (its `execution_config` target), and it takes that
manifest's permissions, isolation and limits. Its `${VAR}` references may name only variables the operator
lists. Nothing here imports the module a definition names: entry points are compared as data.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from echo_tools.errors import ToolReadOnlyError, ToolRegistrationError
from echo_tools.models import ToolDef, ToolPermission, ToolSource, ToolType

PYTHON_TYPES = frozenset({ToolType.LOCAL, ToolType.CREWAI, ToolType.LANGCHAIN})
TARGET_KEYS = ("module", "class", "method", "function", "factory")
# what a remote clone of a declared entry point takes from the manifest, never from the caller
INHERITED_FIELDS = ("permissions", "timeout_ms", "side_effect", "retry", "max_output_chars")
# any `${...}`, well-formed or not: a reference the resolver would skip today is still refused
ENV_REFERENCE = re.compile(r"\$\{([^}]*)\}")

EntryPoint = tuple[str, ...]


def entry_point(tool: ToolDef) -> EntryPoint:
    """The code a Python-backed tool runs, as data: `(tool_type, module, class, method, function, factory)`."""
    config = tool.execution_config
    return (tool.tool_type.value, *(str(config.get(key) or "") for key in TARGET_KEYS))


def declared_entry_points(tools: Iterable[ToolDef]) -> dict[EntryPoint, ToolDef]:
    """The entry points the discovered manifests (`builtin` tools) declare, each with its manifest."""
    return {
        entry_point(t): t
        for t in tools
        if t.source == ToolSource.BUILTIN and t.tool_type in PYTHON_TYPES and t.execution_config
    }


def declared_mcp_tools(tools: Iterable[ToolDef]) -> dict[tuple[str, str], ToolDef]:
    """`(server, tool)` of every tool found by MCP server discovery."""
    out: dict[tuple[str, str], ToolDef] = {}
    for t in tools:
        config = t.execution_config
        if t.source == ToolSource.MCP and isinstance(config.get("server"), str):
            out[(config["server"], str(config.get("tool")))] = t
    return out


def trust_tags(tool: ToolDef) -> list[str]:
    """`tool.tags` with exactly one `source:<source>` tag, and for manifests `category:<category>`.

    Tags already right keep their order, so an unchanged manifest is never rewritten.
    """
    wanted = [f"source:{tool.source.value}"]
    owned = ["source:"]
    category = tool.metadata.get("category") if isinstance(tool.metadata, dict) else None
    if tool.source == ToolSource.BUILTIN:
        owned.append("category:")  # a manifest's category is its metadata's, whatever its tags say
        if isinstance(category, str) and category.strip():
            wanted.append(f"category:{category.strip()}")
    kept: list[str] = []
    for tag in tool.tags:
        if tag.startswith(tuple(owned)) and (tag not in wanted or tag in kept):
            continue
        kept.append(tag)
    kept.extend(t for t in wanted if t not in kept)
    return kept


def with_trust_tags(tool: ToolDef) -> ToolDef:
    """`tool`, or a copy whose tags `trust_tags` corrected."""
    tags = trust_tags(tool)
    return tool if tags == tool.tags else tool.model_copy(update={"tags": tags})


def _refuse(tool: ToolDef, field: str, message: str) -> ToolRegistrationError:
    return ToolRegistrationError(f"Tool {tool.tool_id!r}: {message}", tool_id=tool.tool_id, field=field)


def env_references(value: Any, path: str = "execution_config") -> Iterator[tuple[str, str]]:
    """Every `${VAR}` in a JSON value (keys and strings, at any depth), as `(field path, VAR)`."""
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            for name in ENV_REFERENCE.findall(item):
                yield where, name
        elif isinstance(item, Mapping):
            for key, child in item.items():
                for name in ENV_REFERENCE.findall(str(key)):
                    yield where, name
                stack.append((f"{where}.{key}", child))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", child) for i, child in enumerate(item))


def check_env_references(tool: ToolDef, allowed_env: Collection[str]) -> None:
    """Refuse a `${VAR}` the operator did not list (`ApiSettings.allowed_env`, `--allow-env`)."""
    for where, name in sorted(env_references(tool.execution_config)):
        if name not in allowed_env:
            listed = sorted(allowed_env) or "none"
            raise _refuse(
                tool,
                where,
                f"{where} references environment variable {name!r}, which the server does not allow "
                f"(allowed: {listed}); the operator lists variables with --allow-env NAME",
            )


def _inherit(tool: ToolDef, declaring: ToolDef, config: dict[str, Any]) -> ToolDef:
    update: dict[str, Any] = {name: getattr(declaring, name) for name in INHERITED_FIELDS}
    update["execution_config"] = config
    category = declaring.metadata.get("category")
    if isinstance(category, str) and category.strip() and f"category:{category.strip()}" not in tool.tags:
        update["tags"] = [*tool.tags, f"category:{category.strip()}"]
    return tool.model_copy(update=update)


def _undeclared(tool: ToolDef, declared: Mapping[EntryPoint, ToolDef]) -> ToolRegistrationError:
    config = tool.execution_config
    module = str(config.get("module") or "")
    same_module = [d for d in declared if d[0] == tool.tool_type.value and d[1] == module]
    if not same_module:
        field, value = "execution_config.module", module
    else:
        mine = entry_point(tool)
        field, value = "execution_config", ""
        for position, key in enumerate(TARGET_KEYS[1:], start=2):
            if all(d[position] != mine[position] for d in same_module):
                field, value = f"execution_config.{key}", mine[position]
                break
    shown = {k: config[k] for k in TARGET_KEYS if k in config}
    return _refuse(
        tool,
        field,
        f"{field} {value!r} is not an entry point any tool manifest declares ({tool.tool_type.value} "
        f"{shown!r}); a tool registered over HTTP may only use the entry point of a discovered manifest",
    )


def remote_definition(
    tool: ToolDef,
    tools: Iterable[ToolDef],
    allowed_env: Collection[str] | None,
) -> ToolDef:
    """The definition a `remote` registration may store, or `ToolRegistrationError` naming the field.

    Args:
        tool: the caller's definition (its `source` is set to `remote` here).
        tools: the catalogue, whose `builtin` and `mcp` tools declare the entry points a remote tool may use.
        allowed_env: the variables `${VAR}` may name; None skips that check (stored files, at load).
    """
    tool = tool.model_copy(update={"source": ToolSource.REMOTE})
    if allowed_env is not None:
        check_env_references(tool, allowed_env)
    config = tool.execution_config
    if "credential" in config:
        # a named credential is a server secret, like an environment variable: the caller picks the URL
        raise _refuse(
            tool,
            "execution_config.credential",
            f"execution_config.credential {config['credential']!r}: a tool registered over HTTP may not name "
            "a stored credential (its secret would go wherever the caller's URL points); register the tool "
            "in-process, or bind the credential per canvas binding",
        )
    if tool.tool_type in PYTHON_TYPES and config:
        tools = list(tools)
        declared = declared_entry_points(tools)
        declaring = declared.get(entry_point(tool))
        if declaring is None:
            raise _undeclared(tool, declared)
        tool = _inherit(tool, declaring, dict(declaring.execution_config))
    elif tool.tool_type == ToolType.MCP and "connector_id" not in config:
        key = (str(config.get("server")), str(config.get("tool")))
        declaring = declared_mcp_tools(tools).get(key)
        if declaring is None:
            raise _refuse(
                tool,
                "execution_config.tool",
                f"execution_config {{server: {key[0]!r}, tool: {key[1]!r}}} is not a tool of a configured "
                "MCP server; a tool registered over HTTP may only use one discovered from a server",
            )
        tool = _inherit(tool, declaring, {"server": key[0], "tool": key[1]})
    else:
        needed = {ToolType.API: ToolPermission.NET_OUTBOUND, ToolType.MCP: ToolPermission.MCP_CONNECT}
        extra = [needed[tool.tool_type]] if tool.tool_type in needed else []
        if any(True for _ in env_references(config)):
            extra.append(ToolPermission.ENV_READ)
        permissions = list(dict.fromkeys([*tool.permissions, *extra]))
        if permissions != tool.permissions:
            tool = tool.model_copy(update={"permissions": permissions})
    return with_trust_tags(tool)


def writable_remotely(existing: ToolDef) -> None:
    """Refuse to let a caller over HTTP replace or delete a tool it did not register that way."""
    if existing.source != ToolSource.REMOTE:
        raise ToolReadOnlyError(
            f"Tool {existing.tool_id!r} has source {existing.source.value!r}: only tools registered over "
            "HTTP (source 'remote') may be replaced or deleted over HTTP; register under another tool_id "
            "and name, or change it where it comes from (its manifest, MCP server or host application)",
            tool_id=existing.tool_id,
            field="tool_id",
        )


def unmarked_copy_of(stored: ToolDef, manifest: ToolDef) -> bool:
    """True when `stored` is a file without a `source` (EchoAI wrote it) holding `manifest` otherwise."""
    if "source" in stored.model_fields_set or stored.source == manifest.source:
        return False

    def unmarked(tool: ToolDef) -> dict[str, Any]:
        data = tool.to_storage_dict()
        data.pop("source")
        data["tags"] = [t for t in tool.tags if not t.startswith(("source:", "category:"))]
        return data

    return unmarked(stored) == unmarked(manifest)
