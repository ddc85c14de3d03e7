"""`echo-tools mcp add|load|list|refresh|remove|resources|prompts`: MCP servers in the `mcpServers` shape.

`add NAME -- CMD ARG...` or `add NAME --command CMD --arg A --env K=V` (stdio), or `add NAME --url URL
--header K=V [--credential CRED | --oauth [--scope S]]` (streamable HTTP) stores the server and registers
every tool it lists; `login NAME` runs an OAuth server's browser step again; a relative command
(`.venv/bin/python`) and arguments naming files here (`notes_server.py`) are stored as absolute paths, a
bare name (`npx`) as given. `load FILE` adds every
server of a config file; `refresh NAME` re-lists the tools; `resources NAME` and `prompts NAME` list what
the server offers beside its tools.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from echo_tools.compat.mcp import field
from echo_tools.redaction import hide_values

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry


def pairs(values: list[str], option: str) -> dict[str, str]:
    """`["K=V", ...]` -> `{"K": "V"}`; an entry without `=` is an error naming the option and the value."""
    from echo_tools.cli.common import CliError

    out: dict[str, str] = {}
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key:
            raise CliError(f"{option} expects KEY=VALUE, got {value!r}", code=2)
        out[key] = rest
    return out


def server_config(args: argparse.Namespace) -> dict[str, Any]:
    """The `mcpServers` entry the options describe (`-- CMD ARG...`, `--command`, or `--url`)."""
    from echo_tools.cli.common import CliError

    rest = list(getattr(args, "server_command", None) or [])
    if rest and (args.command or args.url):
        option = "--command" if args.command else "--url"
        raise CliError(
            f"give the server's command either after -- or with {option}, not both: {rest!r}", code=2
        )
    if not (rest or args.command or args.url):
        raise CliError("mcp add needs the server: -- CMD ARG..., --command CMD, or --url URL", code=2)
    if rest or args.command:
        command, arguments = (rest[0], rest[1:] + list(args.arg)) if rest else (args.command, list(args.arg))
        config: dict[str, Any] = {"command": absolute_command(command), "args": absolute_files(arguments)}
        if args.env:
            config["env"] = pairs(args.env, "--env")
        return config
    config = {"url": args.url}
    if args.header:
        config["headers"] = pairs(args.header, "--header")
    if getattr(args, "credential", None):
        config["credential"] = args.credential
    if getattr(args, "oauth", False) or getattr(args, "scope", None):
        config["oauth"] = {"scopes": list(args.scope)} if args.scope else {}
    return config


def absolute_files(arguments: list[str]) -> list[str]:
    """The arguments, each naming a file of the current folder (`notes_server.py`, `conf/x.json`) made
    absolute: the stored server is started from whatever folder a later command runs in."""
    return [
        os.path.abspath(a) if not a.startswith("-") and not os.path.isabs(a) and os.path.isfile(a) else a
        for a in arguments
    ]


def absolute_command(command: str) -> str:
    """A command with a folder in it (`.venv/bin/python`, `./server`) as an absolute path against the
    current folder, so the stored server starts from anywhere; a bare name (`npx`) is found on PATH."""
    if os.sep in command or (os.altsep and os.altsep in command):
        return os.path.abspath(command)
    return command


def run_mcp(args: argparse.Namespace, registry: ToolRegistry) -> int:
    from echo_tools.cli.mcp_login import install_login, login

    if args.mcp_command in ("add", "load", "refresh", "login"):
        install_login(registry, open_browser=getattr(args, "open", False))  # for servers with `oauth`
    if args.mcp_command == "login":
        return login(registry, args.name)
    if args.mcp_command == "add":
        print_tools(args.name, registry.add_mcp_server(args.name, server_config(args)), "registered")
        return 0
    if args.mcp_command == "load":
        added = registry.load_mcp_config(args.file)
        sys.stdout.write(f"{len(added)} MCP servers added from {args.file}\n")
        for name, tools in added.items():
            print_tools(name, tools, "registered")
        return 0
    if args.mcp_command in ("resources", "prompts"):
        return show_catalogue(registry, args.name, args.mcp_command)
    if args.mcp_command == "refresh":
        print_tools(args.name, registry.refresh_mcp_server(args.name), None)
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


def show_catalogue(registry: ToolRegistry, name: str, kind: str) -> int:
    """Print the server's resources (and resource templates) or prompts, one per line."""
    from echo_tools.mcp.config import check_server_name, server_config
    from echo_tools.mcp.sessions import list_catalogue
    from echo_tools.runtime import run_sync

    name = check_server_name(name)
    items = run_sync(list_catalogue(name, server_config(registry, name), registry.egress, kind))
    sys.stdout.write(f"MCP server {name!r}: {len(items)} {kind}\n")
    for item in items:
        if kind == "prompts":
            arguments = ", ".join(a.name + ("" if a.required else "?") for a in item.arguments or [])
            line = f"  {item.name}({arguments})"
        else:
            where = getattr(item, "uri", None) or field(item, "uriTemplate")
            line = f"  {where}  {field(item, 'mimeType') or ''}".rstrip()
        about = item.description or item.title
        sys.stdout.write(f"{line}  {about.splitlines()[0]}\n" if about else f"{line}\n")
    reader = "read_resource" if kind == "resources" else "get_prompt"
    if items:
        sys.stdout.write(f"(agents read them with the tool mcp_{name}_{reader})\n")
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
    if isinstance(config.get("credential"), str):
        extra += f"  credential={config['credential']}"
    elif config.get("oauth") is not None:
        extra += "  oauth"
    return f"{name}  {where.strip()}{count}{extra}"


def add_auth_parsers(add: argparse.ArgumentParser, actions: Any, handler: Any, late: Any) -> None:
    """`mcp add`'s `--credential`, `--oauth`, `--scope`, `--open`, and `mcp login NAME`."""
    auth = add.add_mutually_exclusive_group()
    auth.add_argument(
        "--credential", metavar="CRED", help="with --url: authenticate with this stored credential"
    )
    auth.add_argument(
        "--oauth", action="store_true", help="with --url: OAuth 2.1 (prints the URL to authorize)"
    )
    add.add_argument("--scope", action="append", default=[], metavar="S", help="OAuth scope (repeatable)")
    add.add_argument("--open", action="store_true", help="with --oauth: open the URL in a browser")
    login = actions.add_parser("login", help="authorize an OAuth MCP server again (prints the URL)")
    login.add_argument("name", metavar="NAME")
    login.add_argument("--open", action="store_true", help="open the URL in a browser")
    late(login)
    login.set_defaults(func=handler)


def print_tools(server: str, tools: list[Any], done: str | None) -> None:
    """`MCP server 'x': N tools [registered]` and a line per tool (with its status when `done` is None)."""
    sys.stdout.write(f"MCP server {server!r}: {len(tools)} tools{' ' + done if done else ''}\n")
    for tool in tools:
        status = "" if done else f"{tool.status.value}  "
        sys.stdout.write(f"  {tool.tool_id}  {status}{tool.name}\n")
