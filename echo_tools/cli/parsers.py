"""Argument parsers of the `echo-tools` subcommands that live in their own modules (mcp, serve, run, ...).

Only argparse here: building the parser must stay as cheap as `echo-tools --help`.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

Handler = Callable[[argparse.Namespace], int]
SubParsers = Any  # argparse's _SubParsersAction is private


def allow_module_after_command(sub: SubParsers) -> None:
    """Accept the global `--allow-module MOD` after the command too (`echo-tools show X --allow-module M`),
    on every command (the actions of `mcp` get it in `add_mcp_parser`)."""
    for parser in dict.fromkeys(sub.choices.values()):
        add_late_allow_module(parser)


def add_late_allow_module(parser: argparse.ArgumentParser) -> None:
    # its own dest: argparse copies a subparser's namespace over the global one, which would drop the
    # values given before the command
    parser.add_argument(
        "--allow-module",
        action="append",
        dest="allow_module_late",
        metavar="MOD",
        help="also allow Python tools from this package (same as the global option)",
    )


class SuggestingParser(argparse.ArgumentParser):
    """An `ArgumentParser` whose usage errors end with "Did you mean 'list'?" for a mistyped command or
    option (subcommand parsers made from it are the same)."""

    def error(self, message: str) -> Any:
        from echo_tools.suggest import usage_hint

        hint = usage_hint(message, re.findall(r"--[\w-]+", self.format_help()))
        super().error(f"{message}.{hint}" if hint else message)


class _RestAfterDashes(argparse.ArgumentParser):
    """A parser that, when its defaults say `takes_rest`, keeps everything after the first `--` as
    `server_command`, verbatim (argparse alone would take `-y` for an option, or refuse the words as
    extra positionals once the options before `--` were read)."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        if args is not None and self.get_default("takes_rest") and "--" in args:
            args = list(args)
            cut = args.index("--")
            namespace, extras = super().parse_known_args(args[:cut], namespace)
            namespace.server_command = args[cut + 1 :]
            return namespace, extras
        return super().parse_known_args(args, namespace)


def add_mcp_parser(sub: SubParsers, handler: Handler) -> None:
    mcp = sub.add_parser("mcp", help="MCP servers: add, load, list, refresh, remove, resources, prompts")
    actions = mcp.add_subparsers(dest="mcp_command", metavar="ACTION", parser_class=_RestAfterDashes)
    actions.required = True

    add = actions.add_parser(
        "add",
        help="add an MCP server and register its tools",
        usage="%(prog)s NAME (--command CMD [--arg A ...] | --url URL | -- CMD [ARG ...]) [options]",
        epilog="After --, the rest of the line is the server's command and its arguments, as typed: "
        "echo-tools mcp add files -- npx -y @modelcontextprotocol/server-filesystem /tmp",
    )
    add.add_argument("name", metavar="NAME", help="server name (tools become mcp tools of this server)")
    how = add.add_mutually_exclusive_group()
    how.add_argument("--command", help="start the server as this process (stdio transport)")
    how.add_argument("--url", help="connect to this streamable-HTTP server URL")
    add.add_argument(
        "--arg", action="append", default=[], metavar="ARG", help="process argument (repeatable)"
    )
    add.add_argument(
        "--env", action="append", default=[], metavar="K=V", help="process environment (repeatable)"
    )
    add.add_argument("--header", action="append", default=[], metavar="K=V", help="HTTP header (repeatable)")
    from echo_tools.cli.mcp import add_auth_parsers  # --credential, --oauth, `mcp login`

    add_auth_parsers(add, actions, handler, add_late_allow_module)
    add_late_allow_module(add)
    add.set_defaults(func=handler, server_command=[], takes_rest=True)

    load = actions.add_parser(
        "load", help="add every server of a config file (Claude's mcpServers or VS Code's servers)"
    )
    load.add_argument(
        "file", metavar="FILE", help='a JSON config: {"mcpServers": {...}} or {"servers": {...}}'
    )
    add_late_allow_module(load)
    load.set_defaults(func=handler)

    listing = actions.add_parser("list", help="the configured MCP servers")
    add_late_allow_module(listing)
    listing.set_defaults(func=handler)

    refresh = actions.add_parser("refresh", help="re-list one server's tools")
    refresh.add_argument("name", metavar="NAME")
    add_late_allow_module(refresh)
    refresh.set_defaults(func=handler)

    remove = actions.add_parser("remove", help="forget a server; its tools are disabled, not deleted")
    remove.add_argument("name", metavar="NAME")
    add_late_allow_module(remove)
    remove.set_defaults(func=handler)

    for kind in ("resources", "prompts"):
        shown = actions.add_parser(kind, help=f"list the {kind} one server offers")
        shown.add_argument("name", metavar="NAME")
        add_late_allow_module(shown)
        shown.set_defaults(func=handler)


def add_serve_parser(sub: SubParsers, handler: Handler) -> None:
    serve = sub.add_parser("serve", help="run the HTTP API (the /tools routes) with uvicorn")
    serve.add_argument(
        "--host", default="127.0.0.1", help="bind address (default 127.0.0.1; others need --api-key)"
    )
    serve.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    serve.add_argument(
        "--api-key", help="require this key (X-API-Key or Bearer); default $ECHO_TOOLS_API_KEY"
    )
    serve.add_argument(
        "--principals",
        metavar="FILE",
        help="JSON file mapping API keys (their SHA-256) to principals with grants (docs/http-api.md)",
    )
    serve.add_argument("--agents-dir", metavar="DIR", help="EchoAI's agent JSON folder for /tools/agent/{id}")
    serve.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allowed browser origin (repeatable; CORS is off without one)",
    )
    serve.add_argument("--max-body-bytes", type=int, help="request body limit (default 1048576)")
    serve.add_argument(
        "--allow-loopback-egress",
        action="store_true",
        help="let api tools reach 127.0.0.1 (off by default when serving)",
    )
    serve.add_argument(
        "--allow-env",
        action="append",
        default=[],
        metavar="NAME",
        help="environment variable that tools registered over HTTP may reference as ${NAME} (repeatable)",
    )
    serve.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    serve.set_defaults(func=handler)


def add_history_parsers(sub: SubParsers, *, events: Handler, runs: Handler, migrate: Handler) -> None:
    """`events` (a JSONL file, or the run history without one), `runs` and `migrate`."""
    p = sub.add_parser(
        "events",
        help="print kept tool events: the run history, or a JSONL event log given as FILE",
        description="Without FILE: the run history of the storage (runs.sqlite, or the database of "
        "--database-url), oldest first, filtered by --run/--tool/--agent/--since. With FILE: that "
        "JSONL event log (only --run applies).",
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="a JSONL event log (default: the run history)")
    p.add_argument("--run", "--run-id", dest="run_id", metavar="RUN_ID", help="only the events of this run")
    p.add_argument("--tool", metavar="ID", help="only the events of this tool (history)")
    p.add_argument("--agent", metavar="ID", help="only the events of this agent (history)")
    p.add_argument("--since", metavar="TIME", help="only events at or after this ISO 8601 time (history)")
    p.add_argument("--limit", type=int, metavar="N", help="at most N events, 1..10000 (history; default 100)")
    p.add_argument("--json", action="store_true", help='print {"events": [...]} (history)')
    p.add_argument(
        "--oldest-first", action="store_true", help="the oldest events first (history; default: newest first)"
    )
    p.set_defaults(func=events)

    p = sub.add_parser(
        "runs",
        help="list the runs kept in the run history, newest first; `runs show RUN_ID`: one run; "
        "`runs cancel RUN_ID`: cancel a paused run",
    )
    p.add_argument("action", nargs="?", choices=("show", "cancel"), help="show or cancel one run")
    p.add_argument("run_id", nargs="?", metavar="RUN_ID", help="the run to show or cancel")
    p.add_argument("--status", metavar="STATUS", help="only the runs with this status")
    p.add_argument("--workflow", metavar="ID", help="only the runs of this workflow")
    p.add_argument("--limit", type=int, default=100, metavar="N", help="at most N runs (default 100)")
    p.add_argument("--json", action="store_true", help='print {"runs": [...]}')
    p.set_defaults(func=runs)

    p = sub.add_parser(
        "migrate",
        help="copy the catalogue and MCP configs between the JSON store and PostgreSQL",
        description="`migrate --to postgresql://...` copies the --storage folder into the database; "
        "`migrate --from postgresql://... --to DIR` copies it back. Exit 1 when something was not copied.",
    )
    p.add_argument(
        "--from", dest="source", metavar="URL|DIR", help="copy from here (default: the --storage folder)"
    )
    p.add_argument("--to", dest="target", required=True, metavar="URL|DIR", help="copy to here")
    p.set_defaults(func=migrate)
