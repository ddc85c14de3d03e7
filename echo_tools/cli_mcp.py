"""`echo-tools mcp add|list|refresh|remove`: MCP servers in the `mcpServers` shape, their tools registered.

`add NAME --command CMD --arg A --env K=V` (stdio) or `add NAME --url URL --header K=V` (streamable HTTP)
stores the server and registers every tool it lists; `refresh NAME` re-lists them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from echo_tools.redaction import hide_values

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry


def pairs(values: list[str], option: str) -> dict[str, str]:
    """`["K=V", ...]` -> `{"K": "V"}`; an entry without `=` is an error naming the option and the value."""
    from echo_tools.cli import CliError

    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise CliError(f"{option} expects KEY=VALUE, got {value!r}", code=2)
        out[key] = rest
    return out


def server_config(args: argparse.Namespace) -> dict[str, Any]:
    """The `mcpServers` entry the options describe."""
    if args.command:
        config: dict[str, Any] = {"command": args.command, "args": list(args.arg)}
        if args.env:
            config["env"] = pairs(args.env, "--env")
        return config
    config = {"url": args.url}
    if args.header:
        config["headers"] = pairs(args.header, "--header")
    return config


def run_mcp(args: argparse.Namespace, registry: ToolRegistry) -> int:
    if args.mcp_command == "add":
        tools = registry.add_mcp_server(args.name, server_config(args))
        sys.stdout.write(f"MCP server {args.name!r}: {len(tools)} tools registered\n")
        for tool in tools:
            sys.stdout.write(f"  {tool.tool_id}  {tool.name}\n")
        return 0
    if args.mcp_command == "refresh":
        tools = registry.refresh_mcp_server(args.name)
        sys.stdout.write(f"MCP server {args.name!r}: {len(tools)} tools\n")
        for tool in tools:
            sys.stdout.write(f"  {tool.tool_id}  {tool.status.value}  {tool.name}\n")
        return 0
    if args.mcp_command == "remove":
        disabled = registry.remove_mcp_server(args.name)
        sys.stdout.write(f"MCP server {args.name!r} removed; {len(disabled)} tools disabled\n")
        for tool_id in disabled:
            sys.stdout.write(f"  {tool_id}\n")
        return 0
    servers = registry.list_mcp_servers()
    items = servers.items() if isinstance(servers, dict) else ((None, s) for s in servers)
    count = 0
    for name, entry in items:
        count += 1
        sys.stdout.write(describe_server(name, entry) + "\n")
    if not count:
        sys.stdout.write("No MCP servers configured (add one with: echo-tools mcp add NAME --command CMD)\n")
    return 0


def describe_server(name: str | None, entry: Any) -> str:
    """One line per server: its name, how it is reached, and its tool count when known."""
    if not isinstance(entry, dict):
        return f"{name}  {entry}" if name else str(entry)
    name = name or entry.get("name", "?")
    config = entry.get("config", entry)
    where = config.get("url") or " ".join([str(config.get("command", "")), *map(str, config.get("args", []))])
    tools = entry.get("tools")
    count = f"  {len(tools)} tools" if isinstance(tools, list) else ""
    if isinstance(entry.get("tool_count"), int):
        count = f"  {entry['tool_count']} tools"
    redacted = hide_values(config.get("headers") or {})
    extra = f"  headers={json.dumps(redacted)}" if redacted else ""
    return f"{name}  {where.strip()}{count}{extra}"
