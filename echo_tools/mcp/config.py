"""MCP servers as tool sources: their configs (the ecosystem's `mcpServers` shape) and their discovery.

Configs are checked here, stored beside the tools in `<storage>/mcp_servers.json` exactly as given
(`${ENV}` references stay references; they are resolved at connect time), and kept in
`registry.mcp_servers`. The registry has no executor, so adding or refreshing a server lists its tools
on a short-lived session on the background loop; the executor's pooled sessions refresh the same way
when a server sends `notifications/tools/list_changed`. A tool that disappeared is disabled, not deleted.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from echo_tools.compat.mcp import field as wire_field
from echo_tools.env_refs import resolve_env_refs
from echo_tools.errors import MCPConnectionError, ToolConfigError, ToolError, ToolNotFoundError
from echo_tools.gate import acting_owner, check_owner
from echo_tools.mcp.auth import bind, check_auth_config, check_registration, set_server_auth
from echo_tools.mcp.bound import bound_config, is_bound
from echo_tools.mcp.limits import DEFAULT_MAX_RESULT_BYTES
from echo_tools.models import SideEffect, ToolDef, ToolPermission, ToolSource, ToolStatus, ToolType, slugify
from echo_tools.redaction import hide_values

if TYPE_CHECKING:
    from mcp import types

    from echo_tools.catalogue import Catalogue

logger = logging.getLogger("echo_tools.mcp")

CONFIG_FILE = "mcp_servers.json"
SERVER_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
TRANSPORTS = {
    "stdio": "stdio",
    "streamable_http": "streamable_http",
    "streamable-http": "streamable_http",
    "http": "streamable_http",
    "sse": "sse",
}
DISCOVERY_TIMEOUT_S = 60.0


# -- config checks -----------------------------------------------------------------------------------


def check_server_name(name: Any) -> str:
    """The lower-cased server name, or `ToolConfigError` naming it when it is not a safe id segment."""
    lowered = name.strip().lower() if isinstance(name, str) else name
    if not isinstance(lowered, str) or not SERVER_NAME.fullmatch(lowered):
        raise ToolConfigError(
            f"MCP server name {name!r} is invalid: it must match {SERVER_NAME.pattern} after lower-casing "
            "(letters, digits, '_' and '-', at most 64 characters)",
            field="mcpServers.name",
        )
    if is_bound(lowered):
        raise ToolConfigError(
            f"MCP server name {name!r} is invalid: names starting 'bound-' are those of servers a canvas "
            "binds for one run only; choose another name",
            field="mcpServers.name",
        )
    return lowered


def check_server_config(name: str, config: Any) -> dict[str, Any]:
    """Check one `mcpServers` entry; returns a copy with `transport` made explicit.

    Stdio servers: `{"command", "args"?, "env"?, "cwd"?}`. URL servers: `{"url", "headers"?,
    "transport"?: "streamable_http" (default) | "sse"}` (`type` is read as `transport`, as VS Code
    writes it), and `credential` (a stored credential's name) or `oauth` (OAuth 2.1, see
    `echo_tools.mcp.auth`). Optional for both: `timeout` (connect seconds), `max_concurrency`,
    `max_result_bytes` (the largest answer kept, default 8 MiB), `protocol` (`auto`, `legacy` or a modern
    revision: which protocol to speak) and `input_rounds` (how many `InputRequiredResult` rounds a call
    may take). Other keys are kept.

    Raises:
        ToolConfigError: the entry is unusable; the message names the server and the field.
    """

    def fail(key: str, message: str) -> ToolConfigError:
        return ToolConfigError(f"MCP server {name!r}: {message}", field=f"mcpServers.{name}.{key}")

    if not isinstance(config, Mapping):
        raise fail("config", f"the config must be an object, got {config!r:.80}")
    out = dict(config)
    kind = out.pop("type", None) if "transport" not in out else out.get("transport")
    if kind is None:
        kind = "streamable_http" if "url" in out and "command" not in out else "stdio"
    if not isinstance(kind, str) or kind.strip().lower() not in TRANSPORTS:
        raise fail("transport", f"transport {kind!r} is unknown; expected one of {sorted(set(TRANSPORTS))}")
    out["transport"] = TRANSPORTS[kind.strip().lower()]
    if out["transport"] == "stdio":
        command = out.get("command")
        if "command" not in out:
            raise fail("command", "a stdio server needs 'command' (or give 'url' for an HTTP server)")
        if not isinstance(command, str) or not command.strip():
            raise fail("command", f"'command' must be a non-empty string, got {command!r}")
        args = out.setdefault("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise fail("args", f"'args' must be a list of strings, got {args!r}")
        _check_strings(out, "env", fail)
        if out.get("cwd") is not None and not isinstance(out["cwd"], str):
            raise fail("cwd", f"'cwd' must be a string, got {out['cwd']!r}")
    else:
        url = out.get("url")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise fail("url", f"'url' must be an http(s) URL with a host, got {url!r}")
        _check_strings(out, "headers", fail)
    check_auth_config(name, out)
    timeout = out.get("timeout")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0
    ):
        raise fail("timeout", f"'timeout' must be a positive number of seconds, got {timeout!r}")
    limit = out.get("max_concurrency")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise fail("max_concurrency", f"'max_concurrency' must be a positive integer, got {limit!r}")
    _check_max_result_bytes(out, fail)
    _check_protocol(out, fail)
    return out


def _check_protocol(config: dict[str, Any], fail: Any) -> None:
    """`protocol`: which revision to speak ("auto": the newest both sides speak; "legacy": the 2025
    revisions' `initialize` handshake; or a modern revision, pinned); `input_rounds`: how many
    `InputRequiredResult` rounds one request may take."""
    from echo_tools.compat.mcp import MODERN_VERSIONS

    protocol = config.get("protocol")
    allowed = ["auto", "legacy", *MODERN_VERSIONS]
    if protocol is not None and protocol not in allowed:
        raise fail("protocol", f"'protocol' must be one of {allowed}, got {protocol!r}")
    rounds = config.get("input_rounds")
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1):
        raise fail("input_rounds", f"'input_rounds' must be a positive integer (default 10), got {rounds!r}")


def _check_max_result_bytes(config: dict[str, Any], fail: Any) -> None:
    limit = config.get("max_result_bytes")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise fail(
            "max_result_bytes",
            f"'max_result_bytes' must be a positive integer (bytes; default {DEFAULT_MAX_RESULT_BYTES}), "
            f"got {limit!r}",
        )


def _check_strings(config: dict[str, Any], key: str, fail: Any) -> None:
    value = config.get(key)
    if value is None:
        return
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise fail(key, f"'{key}' must map names to strings, got {value!r:.120}")


def redact_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy safe to show: `env` and `headers` values hidden unless they are `${VAR}` references."""
    out = dict(config)
    for key in ("env", "headers"):
        if isinstance(out.get(key), Mapping):
            out[key] = hide_values(out[key])
    return out


# -- the config store --------------------------------------------------------------------------------


def _read_stored(registry: Catalogue) -> dict[str, Any]:
    return dict(registry.storage.mcp_configs.load()) if registry.storage is not None else {}


def _store(registry: Catalogue, name: str, config: dict[str, Any] | None) -> None:
    """Write one server's config (or remove it when `config` is None); memory only without storage."""
    if registry.storage is None:
        if config is None:
            registry.mcp_servers.pop(name, None)
        else:
            registry.mcp_servers[name] = config
        return
    configs = registry.storage.mcp_configs
    if config is None:
        configs.remove(name)
    else:
        configs.put(name, config)
    registry.mcp_servers.clear()
    registry.mcp_servers.update(configs.load())


def server_config(registry: Catalogue, name: str) -> dict[str, Any]:
    """The stored config of server `name` (references unresolved), or of a server a canvas bound for one
    compile or run only (`echo_tools.mcp.bound`) while it is bound.

    Raises:
        ToolNotFoundError: no server of that name is configured.
    """
    if is_bound(name):
        held = bound_config(name)
        if held is None:
            raise ToolNotFoundError(
                f"MCP server {name!r} was bound for one workflow run only, which has ended", field="server"
            )
        return held
    config = registry.mcp_servers.get(name)
    if config is None:
        registry.mcp_servers.update(
            {k: v for k, v in _read_stored(registry).items() if k not in registry.mcp_servers}
        )
        config = registry.mcp_servers.get(name)
    if config is None:
        known = sorted(registry.mcp_servers)
        raise ToolNotFoundError(
            f"No MCP server named {name!r} is configured (known: {known})", field="server"
        )
    return bind(registry, name, config)


def list_mcp_servers(registry: Catalogue) -> dict[str, dict[str, Any]]:
    """Every configured server: `{name: {"transport", "config" (redacted), "tools": [tool ids]}}`."""
    registry.mcp_servers.update(
        {k: v for k, v in _read_stored(registry).items() if k not in registry.mcp_servers}
    )
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(registry.mcp_servers):
        config = registry.mcp_servers[name]
        tools = [
            t.tool_id for t in registry.list_by_type(ToolType.MCP) if t.execution_config.get("server") == name
        ]
        out[name] = {"transport": config.get("transport"), "config": redact_config(config), "tools": tools}
    return out


# -- add, load, refresh, remove ----------------------------------------------------------------------


def add_mcp_server(
    registry: Catalogue, name: str, config: Mapping[str, Any], *, auth: Any = None
) -> list[ToolDef]:
    """Check and store a server's config, list its tools and register them (see module docstring).

    Args:
        auth: an `httpx.Auth` for this HTTP server's connections in this process, used as is (not stored).

    Raises:
        ToolConfigError: the config is invalid, or names a credential of a type an MCP server cannot use
            (nothing is stored).
        MCPConnectionError: the server could not be started or reached (nothing is stored).
    """
    name = check_server_name(name)
    checked = check_server_config(name, config)
    refuse_unowned_server(registry, name)
    check_env_refs(name, checked)
    check_registration(registry, name, checked)
    if auth is not None:
        if checked["transport"] == "stdio":
            raise ToolConfigError(
                f"MCP server {name!r}: auth is for HTTP servers; a stdio server takes its secrets in 'env'",
                field="auth",
            )
        set_server_auth(registry, name, auth)
    try:
        listing = _discover(registry, name, checked)
    except ToolError:
        if auth is not None:
            set_server_auth(registry, name, None)
        raise
    return register_server(registry, name, checked, listing)


def check_env_refs(name: str, config: Mapping[str, Any]) -> None:
    """Raise `ToolConfigError` naming the variable when `env` or `headers` refer to one that is not set."""
    for field in ("env", "headers"):
        if config.get(field):
            resolve_env_refs(config[field], server=name, field=field)


def register_server(
    registry: Catalogue, name: str, config: Mapping[str, Any], listing: list[types.Tool]
) -> list[ToolDef]:
    """Store a server's config and register the tools of a listing already fetched (or cached).

    The config records its `owner`: the principal acting now (`echo_tools.gate.acting_owner`; none for
    the CLI and in-process Python, which are the operator), and the server's tools carry it too.

    Raises:
        ToolOwnedError: a server of that name is another principal's (HTTP 409 `owned`).
    """
    name = check_server_name(name)
    checked = check_server_config(name, config)
    refuse_unowned_server(registry, name)
    checked.pop("owner", None)  # never taken from the config given: it is who stores it
    owner = acting_owner()
    if owner is not None:
        checked["owner"] = owner
    _store(registry, name, checked)
    return apply_listing(registry, name, listing)


def refuse_unowned_server(registry: Catalogue, name: str) -> None:
    """`ToolOwnedError` naming the owner when server `name` exists and is not the acting principal's to
    replace or remove (only its owner or an admin may; no recorded owner: the operator's)."""
    current = registry.mcp_servers.get(name) or _read_stored(registry).get(name)
    if current is not None:
        check_owner(current.get("owner"), f"MCP server {name!r}", field="server")


def servers_of(data: Any, source: str) -> dict[str, Any]:
    """The server entries of an MCP config document: Claude's `{"mcpServers": {...}}` or VS Code's
    `mcp.json` `{"servers": {...}}` (its `inputs` prompts are not supported: use `${VAR}` references).

    Raises:
        ToolConfigError: neither object is there, or both are (the message names `source`).
    """
    found = [key for key in ("mcpServers", "servers") if isinstance(data, dict) and key in data]
    if len(found) != 1 or not isinstance(data[found[0]], dict):
        got = "both 'mcpServers' and 'servers'" if len(found) == 2 else "neither"
        raise ToolConfigError(
            f"MCP config {source!r} must hold one object of servers: 'mcpServers' (Claude Desktop, Cursor) or "
            f"'servers' (VS Code's mcp.json); it has {got if len(found) != 1 else repr(found[0]) + ' but not as an object'}",
            field="mcpServers",
        )
    servers: dict[str, Any] = data[found[0]]
    return servers


def load_mcp_config(registry: Catalogue, path: str | Path) -> dict[str, list[ToolDef]]:
    """Add every server of an MCP config file (`mcpServers` or VS Code's `servers` shape).

    Every entry is checked before any is added; the servers are then listed concurrently, and each one
    that answered is registered.

    Raises:
        ToolConfigError: the file or an entry is invalid (nothing is added).
        MCPConnectionError: some servers could not be reached (the others were added); names them all.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ToolConfigError(f"MCP config file {str(path)!r} cannot be read: {exc}", field="path") from exc
    checked = {}
    for raw_name, config in servers_of(data, str(path)).items():
        name = check_server_name(raw_name)
        checked[name] = check_server_config(name, config)
        check_env_refs(name, checked[name])
        check_registration(registry, name, checked[name])
    listings = _discover_all(registry, checked)
    added: dict[str, list[ToolDef]] = {}
    failures: list[str] = []
    for name, config in checked.items():
        listing = listings[name]
        if isinstance(listing, ToolError):
            failures.append(listing.message)
            continue
        added[name] = register_server(registry, name, config, listing)
    if failures:
        raise MCPConnectionError(
            f"{len(failures)} of {len(checked)} MCP servers in {str(path)!r} could not be added "
            f"(added: {sorted(added)}): " + "; ".join(failures)
        )
    return added


def _discover_all(
    registry: Catalogue, configs: dict[str, dict[str, Any]]
) -> dict[str, list[types.Tool] | ToolError]:
    """List every server's tools at once; a server that fails gets its error instead of a listing."""
    from echo_tools.runtime import run_sync

    async def each(name: str, config: dict[str, Any]) -> list[types.Tool] | ToolError:
        from echo_tools.mcp.sessions import discover_tools

        timeout = float(config.get("timeout") or 15.0) + DISCOVERY_TIMEOUT_S
        try:
            bound = bind(registry, name, config)
            return await asyncio.wait_for(discover_tools(name, bound, registry.egress), timeout)
        except TimeoutError:
            return MCPConnectionError(
                f"MCP server {name!r}: listing its tools took longer than {timeout:g} s"
            )
        except ToolError as exc:
            return exc

    async def every() -> list[list[types.Tool] | ToolError]:
        return await asyncio.gather(*(each(name, config) for name, config in configs.items()))

    longest = max((float(c.get("timeout") or 15.0) for c in configs.values()), default=0.0)
    results = run_sync(every(), timeout=longest + DISCOVERY_TIMEOUT_S + 5)
    return dict(zip(configs, results, strict=True))


def refresh_mcp_server(registry: Catalogue, name: str) -> list[ToolDef]:
    """List the server's tools again: new ones registered, changed ones updated, vanished ones disabled."""
    name = check_server_name(name)
    return apply_listing(registry, name, _discover(registry, name, server_config(registry, name)))


def remove_mcp_server(registry: Catalogue, name: str) -> list[str]:
    """Forget a server's config and disable its tools; returns the disabled tool ids."""
    name = check_server_name(name)
    server_config(registry, name)
    refuse_unowned_server(registry, name)
    disabled = _disable_missing(registry, name, keep=set())
    _store(registry, name, None)
    set_server_auth(registry, name, None)
    return disabled


def _discover(registry: Catalogue, name: str, config: dict[str, Any]) -> list[types.Tool]:
    from echo_tools.mcp.sessions import discover_tools
    from echo_tools.runtime import run_sync

    timeout = float(config.get("timeout") or 15.0) + DISCOVERY_TIMEOUT_S
    try:
        return run_sync(discover_tools(name, bind(registry, name, config), registry.egress), timeout=timeout)
    except TimeoutError as exc:
        raise MCPConnectionError(
            f"MCP server {name!r}: listing its tools took longer than {timeout:g} s"
        ) from exc


# -- listing -> ToolDefs -----------------------------------------------------------------------------


def tool_defs(server: str, listing: list[types.Tool], credential: str | None = None) -> list[ToolDef]:
    """One `ToolDef` per MCP tool: ids `mcp_<server>_<tool slug>`, names `<server>_<tool>`, unique; the
    server's `credential` (a name) is shown on each, as on `api` tools."""
    named = {"credential": credential} if credential else {}
    out: list[ToolDef] = []
    used: set[str] = set()
    for tool in listing:
        digest = hashlib.sha1(tool.name.encode()).hexdigest()[:6]
        suffix, name = slugify(tool.name)[:80] or digest, f"{server}_{tool.name}"[:190]
        if suffix in used:  # two MCP names with one slug ("get-data", "get_data"): keep both apart
            suffix, name = f"{suffix}_{digest}", f"{name}_{digest}"
        used.add(suffix)
        annotations = tool.annotations
        side_effect = SideEffect.EXTERNAL
        if annotations is not None and wire_field(annotations, "readOnlyHint"):
            side_effect = SideEffect.PURE
        elif annotations is not None and wire_field(annotations, "idempotentHint"):
            side_effect = SideEffect.IDEMPOTENT
        task_support = wire_field(tool.execution, "taskSupport") if tool.execution is not None else None
        mcp_meta: dict[str, Any] = {
            "server": server,
            "tool": tool.name,
            "title": tool.title,
            "annotations": annotations.model_dump(by_alias=True, exclude_none=True) if annotations else {},
        }
        if task_support == "required":
            # the 2025-11-25 experimental tasks (the client asks for a task): not spoken, so every call
            # would fail and the tool is not offered; the 2026-07-28 Tasks extension needs no such flag
            mcp_meta["disabled_reason"] = (
                "the server requires MCP tasks (execution.taskSupport 'required', the 2025-11-25 experimental "
                "tasks), which echo-tools does not speak; it follows the 2026-07-28 Tasks extension instead"
            )
        out.append(
            ToolDef(
                tool_id=f"mcp_{server}_{suffix}"[:128],
                name=name,
                description=tool.description or tool.title or tool.name,
                tool_type=ToolType.MCP,
                input_schema=wire_field(tool, "inputSchema") or {"type": "object"},
                output_schema=wire_field(tool, "outputSchema") or {},
                # a catalogue tool (read_resource, get_prompt) also names the request it sends
                execution_config={"server": server, "tool": tool.name, **_catalogue_method(tool), **named},
                tags=["source:mcp", f"mcp_server:{server}"],
                metadata={"mcp": mcp_meta},
                status=ToolStatus.DISABLED if task_support == "required" else ToolStatus.ACTIVE,
                side_effect=side_effect,
                permissions=[ToolPermission.MCP_CONNECT],
                source=ToolSource.MCP,
            )
        )
    return out


def _catalogue_method(tool: types.Tool) -> dict[str, str]:
    from echo_tools.mcp.sessions import CATALOGUE_META

    method = (tool.meta or {}).get(CATALOGUE_META)
    return {"method": method} if isinstance(method, str) else {}


def apply_listing(registry: Catalogue, server: str, listing: list[types.Tool]) -> list[ToolDef]:
    """Register a server's current tools and disable the ones it no longer lists.

    A tool already in the catalogue keeps the status, timeout, retry and permissions set on it, except
    that one disabled because it had vanished becomes active again. Unchanged tools are not rewritten.
    A tool the registry refuses (an invalid schema, a name clash) is logged and skipped.

    Returns:
        The server's current tools as registered (none for a server bound for one run only: its tools
        are never registered, whatever it lists).
    """
    if is_bound(server):
        return []
    current: list[ToolDef] = []
    config = registry.mcp_servers.get(server, {})
    credential, owner = config.get("credential"), config.get("owner")
    for fresh in tool_defs(server, listing, credential if isinstance(credential, str) else None):
        if isinstance(owner, str):
            fresh = fresh.model_copy(update={"owner": owner})
        old = registry.get(fresh.tool_id)
        if old is not None:
            vanished = bool(old.metadata.get("mcp", {}).get("missing"))
            status = ToolStatus.ACTIVE if vanished else old.status
            if fresh.status == ToolStatus.DISABLED:
                status = ToolStatus.DISABLED  # task-required: never offered, whatever it was before
            fresh = fresh.model_copy(
                update={
                    "status": status,
                    "timeout_ms": old.timeout_ms,
                    "retry": old.retry,
                    "permissions": old.permissions,
                }
            )
        try:
            if old is None or old.to_storage_dict() != fresh.to_storage_dict():
                registry.register(fresh)
        except ToolError as exc:
            logger.warning(
                "MCP server %r: tool %r not registered: %s", server, fresh.execution_config["tool"], exc
            )
            continue
        current.append(registry.get(fresh.tool_id) or fresh)
    _disable_missing(registry, server, keep={t.tool_id for t in current})
    return current


def _disable_missing(registry: Catalogue, server: str, keep: set[str]) -> list[str]:
    disabled = []
    for tool in registry.list_by_type(ToolType.MCP):
        if tool.execution_config.get("server") != server or tool.tool_id in keep:
            continue
        if tool.status == ToolStatus.DISABLED and tool.metadata.get("mcp", {}).get("missing"):
            continue
        metadata = {**tool.metadata, "mcp": {**tool.metadata.get("mcp", {}), "missing": True}}
        registry.register(tool.model_copy(update={"status": ToolStatus.DISABLED, "metadata": metadata}))
        disabled.append(tool.tool_id)
    return disabled
