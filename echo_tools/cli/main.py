"""The `echo-tools` command: list, show, invoke and validate tools, discover, MCP servers, events, serve, run.

Startup stays fast: this module imports only the standard library and argparse at load; the catalogue, the
executor, rich, FastAPI and the agent frameworks are imported inside the commands that need them. Errors are
one line on stderr and a non-zero exit code; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from echo_tools.cli.catalogue import (
    open_executor,
    open_registry,
    refused_hint,
    require_tool,
    storage_folder,
    where_looked,
)
from echo_tools.cli.common import PROG, CliError, print_json, read_input, use_rich

# -- commands ----------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    from echo_tools.errors import ToolValidationError

    registry = open_registry(args)
    try:
        tools = registry.list_by_type(args.type) if args.type else registry.list_all()
    except ToolValidationError as exc:
        raise CliError(f"list --type: {exc}", code=2) from exc
    if args.json:
        from echo_tools.api.shapes import list_items

        print_json(list_items(tools))
        return 0
    rows = [(t.tool_id, t.tool_type.value, t.status.value, t.version, t.name) for t in tools]
    if use_rich():
        from rich.console import Console
        from rich.table import Table

        from echo_tools.cli.history import where

        table = Table(title=f"{len(rows)} tools in {where(args)}")
        for column in ("tool_id", "type", "status", "version", "name"):
            table.add_column(column)
        for cells in rows:
            table.add_row(*cells)
        Console().print(table)
    else:
        widths = [
            max([len(h), *(len(r[i]) for r in rows)])
            for i, h in enumerate(("tool_id", "type", "status", "version"))
        ]
        for row in [("TOOL_ID", "TYPE", "STATUS", "VERSION", "NAME"), *rows]:
            sys.stdout.write(
                "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)) + "  " + row[4] + "\n"
            )
    for problem in registry.problems():
        sys.stderr.write(f"{PROG}: warning: {problem}\n")
    hint = refused_hint(registry)
    if hint:
        sys.stderr.write(f"{PROG}: {hint}\n")
    return 0


def cmd_init(args: argparse.Namespace) -> int:
    """`init`: make `./.echo_tools`, which every command run in this folder or below it then uses (found
    upward, as git finds `.git`), unless `--storage` or `ECHO_TOOLS_HOME` names another."""
    from echo_tools.settings import DEFAULT_STORAGE, find_storage

    folder = Path(args.storage or DEFAULT_STORAGE).absolute()
    existed = folder.is_dir()
    folder.mkdir(parents=True, exist_ok=True)
    sys.stdout.write(f"{'kept' if existed else 'made'} {folder}\n")
    chosen = find_storage(args.storage)
    if chosen.path != folder:
        sys.stderr.write(f"{PROG}: note: commands here still use {chosen.describe()}\n")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    registry = open_registry(args)
    tool = require_tool(registry, args.ref)
    if getattr(args, "steps", False):  # a skill's steps drawn (echo_tools.cli.steps)
        from echo_tools.cli.steps import show_steps

        drawing = show_steps(registry, tool)
        if drawing is None:
            raise CliError(f"tool {tool.tool_id!r} is a {tool.tool_type.value} tool: only skills have steps")
        print(drawing)
        return 0
    print_json(tool.to_storage_dict())
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from echo_tools.cli.steps import cmd_plan as draw_plan

    return draw_plan(args)


def cmd_invoke(args: argparse.Namespace) -> int:
    from echo_tools.models import ToolContext

    data = read_input(args.input)
    registry = open_registry(args)
    executor = open_executor(registry, args)
    context = ToolContext(run_id=args.run_id, timeout_ms=args.timeout_ms)
    try:
        result = executor.invoke_sync(args.ref, data, context)
    finally:
        executor.close()
    print_json(result.model_dump(mode="json"))
    if not result.success:
        sys.stderr.write(f"{PROG}: {result.tool_id} failed ({result.error_type}): {result.error}\n")
        if result.error_type == "not_found":
            hint = refused_hint(registry, args.ref)
            sys.stderr.write(f"{PROG}: {hint or where_looked(storage_folder(registry))}\n")
        return 1
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    data = read_input(args.input)
    registry = open_registry(args)
    tool = require_tool(registry, args.ref)
    errors = registry.input_errors(tool.tool_id, data)
    print_json({"valid": not errors, "tool_id": tool.tool_id, "errors": errors})
    return 0 if not errors else 1


def cmd_discover(args: argparse.Namespace) -> int:
    registry = open_registry(args)
    dirs = [Path(args.dir)] if args.dir else None
    if dirs is None and not registry.discovery_dirs:
        raise CliError("the AgentTools package is not installed; give the folder to scan: discover DIR")
    found = registry.discover_local_tools(dirs)
    sys.stdout.write(f"Discovered {len(found)} tools: {', '.join(t.tool_id for t in found) or '-'}\n")
    for problem in registry.problems():
        sys.stderr.write(f"{PROG}: warning: {problem}\n")
    return 0


def cmd_events(args: argparse.Namespace) -> int:
    """`events FILE`: a JSONL event log; `events` without FILE: the run history (see cli_history)."""
    from echo_tools.cli.output import format_event_line

    if args.file is None:
        from echo_tools.cli.history import cmd_events_history

        return cmd_events_history(args)
    for option, value in (("--tool", args.tool), ("--agent", args.agent), ("--since", args.since)):
        if value is not None:
            raise CliError(f"events {option} reads the run history: leave out FILE ({args.file!r})", code=2)
    if args.limit is not None or args.json:
        raise CliError(f"events --limit and --json read the run history: leave out FILE ({args.file!r})", 2)
    path = Path(args.file)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise CliError(f"event log {str(path)!r} cannot be read: {exc.strerror or exc}") from exc
    shown = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            sys.stderr.write(f"{PROG}: warning: {path}:{number} is not JSON, skipped\n")
            continue
        if not isinstance(event, dict) or (args.run_id and event.get("run_id") != args.run_id):
            continue
        sys.stdout.write(format_event_line(event) + "\n")
        shown += 1
    sys.stdout.write(f"{shown} events\n")
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from echo_tools.cli.mcp import run_mcp

    return run_mcp(args, open_registry(args))


def cmd_serve(args: argparse.Namespace) -> int:
    from echo_tools.cli.serve import serve

    return serve(args)


# -- parser and entry point --------------------------------------------------------------------------


def _version_text() -> str:
    from echo_tools import __version__

    return f"{PROG} {__version__} (Python {sys.version.split()[0]})"


def build_parser() -> argparse.ArgumentParser:
    """The `echo-tools` parser: the global options, then one subparser per command (those of other
    installed packages too)."""
    from echo_tools.cli.approvals import add_approvals_parser
    from echo_tools.cli.history import cmd_migrate, cmd_runs
    from echo_tools.cli.parsers import (
        SuggestingParser,
        add_history_parsers,
        add_mcp_parser,
        add_plugin_parsers,
        add_serve_parser,
        allow_module_after_command,
    )
    from echo_tools.cli.thirdparty import add_thirdparty_parsers, run_thirdparty  # import, credentials

    parser = SuggestingParser(  # usage errors say which command or option was meant
        prog=PROG, description="echo-tools: one tool catalogue and executor for EchoAI, CrewAI and LangGraph."
    )
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _add_catalogue_parsers(sub)
    add_mcp_parser(sub, cmd_mcp)
    add_history_parsers(sub, events=cmd_events, runs=cmd_runs, migrate=cmd_migrate)
    add_plugin_parsers(sub)
    add_serve_parser(sub, cmd_serve)
    add_thirdparty_parsers(sub, run_thirdparty)
    add_approvals_parser(sub)  # approvals list | approve | reject (echo_tools.governance)
    allow_module_after_command(sub)
    return parser


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """The options before the command: --version, --storage, --allow-module, --database-url, ..."""
    parser.add_argument("--version", action="version", version=_version_text())
    parser.add_argument(
        "--storage",
        metavar="DIR",
        help="tool storage folder (default: $ECHO_TOOLS_HOME, else the nearest .echo_tools upward, else the per-user default)",
    )
    parser.add_argument(
        "--allow-module",
        action="append",
        metavar="MOD",
        help="also allow Python tools from this package (repeatable; also after the command, "
        "and in $ECHO_TOOLS_ALLOWED_MODULES)",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="keep everything in this PostgreSQL database (postgresql://...; default "
        "$ECHO_TOOLS_DATABASE_URL; without one: the --storage folder and its runs.sqlite)",
    )
    parser.add_argument(
        "--history-days",
        type=float,
        default=None,
        metavar="DAYS",
        help="forget run history events older than this (default 30)",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")


def _add_catalogue_parsers(sub: Any) -> None:
    """init, list, show, plan, invoke, validate, discover."""
    p = sub.add_parser("init", help="keep this project's tools, runs and approvals in ./.echo_tools")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("list", help="list the tools")
    p.add_argument("--type", help="only this tool type (local, mcp, api, crewai, langchain)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="print one tool's definition")
    p.add_argument("ref", metavar="ID", help="tool id or name")
    p.add_argument("--steps", action="store_true", help="draw a skill's steps instead of the JSON")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("plan", help="plan steps by capability (echo_tools.planning) and draw them")
    p.add_argument("capabilities", nargs="+", metavar="CAPABILITY", help="a capability or a tool ref")
    p.add_argument("--inputs", metavar="JSON", help="the plan's inputs, a JSON object")
    p.add_argument("--json", action="store_true", help="print the plan (a skill's execution_config) as JSON")
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("invoke", help="call a tool and print the ToolResult (exit 1 on failure)")
    p.add_argument("ref", metavar="REF", help="tool id or name")
    p.add_argument("--input", metavar="JSON|@FILE", help="the arguments, a JSON object")
    p.add_argument("--run-id", help="run id carried into the events")
    p.add_argument("--timeout-ms", type=int, help="override the tool's timeout")
    p.add_argument("--events", metavar="FILE", help="append the call's events to this JSONL file")
    p.set_defaults(func=cmd_invoke)

    p = sub.add_parser("validate", help="check arguments against a tool's input schema")
    p.add_argument("ref", metavar="REF")
    p.add_argument("--input", metavar="JSON|@FILE")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("discover", help="register the tools of tool_manifest.json folders")
    p.add_argument("dir", nargs="?", metavar="DIR", help="folder to scan (default: the AgentTools package)")
    p.set_defaults(func=cmd_discover)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 failure, 2 usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from echo_tools.cli.history import opened

    opened(args)  # before any command copies args: the copies share what is opened
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130
    except Exception as exc:  # boundary: every failure becomes one line unless --debug
        if args.debug:
            raise
        sys.stderr.write(f"{PROG}: error: {describe(exc)}\n")
        return exc.code if isinstance(exc, CliError) else 1
    finally:
        from echo_tools.cli.history import close_stores

        close_stores(args)


def describe(exc: BaseException) -> str:
    """One line for an exception: our messages as they are, foreign ones with their type."""
    from echo_tools.errors import ToolError

    if isinstance(exc, (CliError, ToolError)):
        text = str(exc)
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.strerror}: {exc.filename!r}" if exc.filename else exc.strerror
    else:
        text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())
