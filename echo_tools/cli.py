"""The `echo-tools` command: list, show, invoke and validate tools, discover, MCP servers, events, serve, run.

Startup stays fast: this module imports only the standard library and argparse at load; the catalogue, the
executor, rich, FastAPI and the agent frameworks are imported inside the commands that need them. Errors are
one line on stderr and a non-zero exit code; `--debug` shows the traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry

PROG = "echo-tools"


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


# -- shared plumbing ---------------------------------------------------------------------------------


def agent_tools_dir() -> Path | None:
    """The folder of the installed `AgentTools` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("AgentTools")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def storage_dir(args: argparse.Namespace) -> Path:
    from echo_tools.settings import default_storage_dir

    return Path(args.storage) if args.storage else default_storage_dir()


def open_registry(args: argparse.Namespace, *, strict_egress: bool = False) -> ToolRegistry:
    """The registry of `--storage`; the AgentTools manifests are discovered when the storage is empty.

    The CLI is a local tool, so loopback egress is allowed (local API and MCP servers), except for
    `serve`, which keeps the strict default unless `--allow-loopback-egress` is given.
    """
    from echo_tools.egress import EgressPolicy
    from echo_tools.registry import DEFAULT_ALLOWED_MODULES, ToolRegistry

    tools_dir = agent_tools_dir()
    allowed = (*DEFAULT_ALLOWED_MODULES, *(args.allow_module or ()))
    registry = ToolRegistry(
        storage_dir=storage_dir(args),
        discovery_dirs=[tools_dir] if tools_dir else [],
        allowed_modules=allowed,
        egress=EgressPolicy() if strict_egress else EgressPolicy.local(),
    )
    if len(registry) == 0 and tools_dir is not None:
        registry.discover_local_tools()
    return registry


def open_executor(
    registry: ToolRegistry, args: argparse.Namespace, *, strict_egress: bool = False
) -> ToolExecutor:
    from echo_tools.egress import EgressPolicy
    from echo_tools.executor import ToolExecutor

    sinks: list[Any] = []
    if getattr(args, "events", None):
        from echo_tools.events import JsonlEventLog

        sinks.append(JsonlEventLog(args.events))
    return ToolExecutor(registry, sinks, egress=EgressPolicy() if strict_egress else EgressPolicy.local())


def read_input(text: str | None) -> dict[str, Any]:
    """`--input` as a JSON object: inline JSON, or `@path` to read it from a file."""
    if text is None:
        return {}
    source = "--input"
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise CliError(f"--input file {str(path)!r} cannot be read: {exc.strerror or exc}") from exc
        source = f"--input file {str(path)!r}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    if not isinstance(data, dict):
        raise CliError(f"{source} must be a JSON object, got {type(data).__name__}: {text.strip()[:60]!r}")
    return data


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def use_rich() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


# -- commands ----------------------------------------------------------------------------------------


def cmd_list(args: argparse.Namespace) -> int:
    registry = open_registry(args)
    tools = registry.list_by_type(args.type) if args.type else registry.list_all()
    if args.json:
        from echo_tools.api_shapes import list_items

        print_json(list_items(tools))
        return 0
    rows = [(t.tool_id, t.tool_type.value, t.status.value, t.version, t.name) for t in tools]
    if use_rich():
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{len(rows)} tools in {storage_dir(args)}")
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
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    registry = open_registry(args)
    print_json(registry.require(args.ref).to_storage_dict())
    return 0


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
        return 1
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    data = read_input(args.input)
    registry = open_registry(args)
    tool = registry.require(args.ref)
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
    from echo_tools.cli_output import format_event_line

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
    from echo_tools.cli_mcp import run_mcp

    return run_mcp(args, open_registry(args))


def cmd_serve(args: argparse.Namespace) -> int:
    from echo_tools.cli_serve import serve

    return serve(args)


def cmd_workflow(args: argparse.Namespace) -> int:
    from echo_tools import cli_workflow

    return int(getattr(cli_workflow, f"cmd_{args.command}")(args))


# -- parser and entry point --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="echo-tools: one tool catalogue and executor for EchoAI, CrewAI and LangGraph."
    )
    parser.add_argument(
        "--storage", metavar="DIR", help="tool storage folder (default: $ECHO_TOOLS_HOME or ./.echo_tools)"
    )
    parser.add_argument(
        "--allow-module", action="append", metavar="MOD", help="also allow Python tools from this package"
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("list", help="list the tools")
    p.add_argument("--type", help="only this tool type (local, mcp, api, crewai, langchain)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("show", help="print one tool's definition")
    p.add_argument("ref", metavar="ID", help="tool id or name")
    p.set_defaults(func=cmd_show)

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

    from echo_tools.cli_parsers import add_mcp_parser, add_serve_parser, add_workflow_parsers

    add_mcp_parser(sub, cmd_mcp)

    p = sub.add_parser("events", help="pretty-print a JSONL event log")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--run-id", help="only the events of this run")
    p.set_defaults(func=cmd_events)

    add_workflow_parsers(sub, cmd_workflow)
    add_serve_parser(sub, cmd_serve)
    from echo_tools.cli_thirdparty import add_thirdparty_parsers, run_thirdparty  # import, credentials

    add_thirdparty_parsers(sub, run_thirdparty)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (0 ok, 1 failure, 2 usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    # run the imported module's main, so `python -m echo_tools.cli` and the helper modules share one
    # `CliError` class (this file also runs as `__main__`, a second copy)
    from echo_tools.cli import main as _main

    sys.exit(_main())
