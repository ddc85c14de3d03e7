"""`echo-tools import openapi` and `echo-tools credentials new-key|set|list|remove`.

A secret is never taken from the command line itself (it would sit in the shell history and `ps`): `set`
reads the credential as JSON from a file (`--from FILE`), from standard input (`--from -`), or asks for
the secret field at a prompt; only names and types are printed.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from echo_tools.cli.parsers import Handler, SubParsers

SECRET_PROMPTS = {
    "bearer": "token",
    "api_key": "value",
    "basic": "password",
    "oauth2_client_credentials": "client_secret",
}


def add_thirdparty_parsers(sub: SubParsers, handler: Handler) -> None:
    """The `import` and `credentials` subcommands; `handler` runs `run_thirdparty`."""
    imp = sub.add_parser("import", help="import third-party APIs as tools (OpenAPI / Swagger)")
    kinds = imp.add_subparsers(dest="import_kind", metavar="KIND")
    kinds.required = True
    openapi = kinds.add_parser(
        "openapi", help="one api tool per operation of an OpenAPI 3.x or Swagger 2.0 spec"
    )
    openapi.add_argument("spec", metavar="SPEC", help="a JSON or YAML file, or an http(s) URL")
    openapi.add_argument(
        "--provider", required=True, help="the API's name: tools become <provider>_<operation>"
    )
    openapi.add_argument(
        "--base-url", help="where calls go (default: the spec's servers[0] or host/basePath)"
    )
    openapi.add_argument("--credential", metavar="NAME", help="the stored credential every call is sent with")
    openapi.add_argument(
        "--operation", action="append", metavar="ID", help="import only this operation (repeatable)"
    )
    openapi.add_argument("--json", action="store_true", help="print the report as JSON")
    openapi.set_defaults(func=handler)

    creds = sub.add_parser("credentials", help="named credentials for api tools, encrypted at rest")
    actions = creds.add_subparsers(dest="credentials_command", metavar="ACTION")
    actions.required = True
    actions.add_parser("new-key", help="print a new ECHO_TOOLS_SECRET_KEY").set_defaults(func=handler)
    put = actions.add_parser(
        "set", help="store a credential (bearer, api_key, basic, oauth2_client_credentials)"
    )
    put.add_argument("name", metavar="NAME")
    put.add_argument("--type", choices=sorted(SECRET_PROMPTS), help="the type (with --field, or a prompt)")
    put.add_argument(
        "--field", action="append", default=[], metavar="K=V", help="a non-secret field, e.g. in=header"
    )
    put.add_argument(
        "--from",
        dest="source",
        metavar="FILE|-",
        help="read the whole credential as JSON from a file or stdin",
    )
    put.set_defaults(func=handler)
    actions.add_parser("list", help="credential names and types").set_defaults(func=handler)
    rm = actions.add_parser("remove", help="forget a credential")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=handler)
    link = actions.add_parser("connect", help="connect an end user's own credential by OAuth 2.1")
    link.add_argument("name", metavar="NAME")
    link.add_argument("--server", required=True, metavar="URL", help="the OAuth-protected server's URL")
    link.add_argument("--redirect-uri", required=True, metavar="URI", help="where the browser is sent back")
    link.add_argument("--scope", action="append", metavar="SCOPE", help="a scope to ask for (repeatable)")
    link.set_defaults(func=handler)
    for parser in (put, rm, link):  # an end user's own credential (echo_tools.credentials.per_user)
        parser.add_argument("--user", metavar="USER_ID", help="the end user's own credential of this name")


def run_thirdparty(args: argparse.Namespace) -> int:
    from echo_tools.cli.catalogue import open_registry

    if args.command == "import":
        return _import(args, open_registry(args))
    if args.credentials_command == "new-key":
        from echo_tools.credentials import SECRET_KEY_ENV, new_key

        sys.stdout.write(new_key() + "\n")
        sys.stderr.write(f"Set it as {SECRET_KEY_ENV} (e.g. export {SECRET_KEY_ENV}=...) and keep it safe.\n")
        return 0
    store = open_registry(args).credentials
    if args.credentials_command == "list":
        for entry in store.list():
            user = f"\tuser {entry['user_id']}" if "user_id" in entry else ""
            sys.stdout.write(f"{entry['name']}\t{entry['type']}{user}\n")
        return 0
    if args.credentials_command == "remove":
        from echo_tools.cli.common import CliError

        if not store.remove(args.name, user_id=args.user):
            raise CliError(f"no credential is named {args.name!r}")
        sys.stdout.write(f"Removed credential {args.name!r}\n")
        return 0
    if args.credentials_command == "connect":
        from echo_tools.cli.common import CliError
        from echo_tools.errors import ToolError
        from echo_tools.governance.connect import connect_from_terminal

        if not args.user:
            raise CliError("credentials connect needs --user USER_ID: whose credential it is", code=2)
        try:
            done = connect_from_terminal(
                store, args.name, args.user, args.server, args.redirect_uri,
                policy=open_registry(args).egress, scopes=args.scope, ask=_ask, say=_say,
            )  # fmt: skip
        except ToolError as exc:
            raise CliError(exc.message) from exc
        sys.stdout.write(
            f"Credential {args.name!r} of user {args.user!r} ({done['type']}) {done['status']}\n"
        )
        return 0
    outcome = store.set(args.name, _read_credential(args), user_id=args.user)
    whose = f" of user {args.user!r}" if args.user else ""
    sys.stdout.write(f"Credential {args.name!r}{whose} ({outcome['type']}) {outcome['status']}\n")
    return 0


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()  # the person (or a script) reads the URL before this process reads its answer


def _ask(prompt: str) -> str:
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return sys.stdin.readline()


def _read_credential(args: argparse.Namespace) -> dict[str, Any]:
    from echo_tools.cli.common import CliError

    if args.source:
        try:
            if args.source == "-":
                text = sys.stdin.read()
            else:
                with open(args.source, encoding="utf-8") as fh:
                    text = fh.read()
            loaded = json.loads(text)
        except OSError as exc:
            raise CliError(f"--from {args.source!r} cannot be read: {exc.strerror or exc}") from exc
        except json.JSONDecodeError as exc:
            raise CliError(f"--from {args.source!r} is not JSON: {exc.msg} at line {exc.lineno}") from exc
        if not isinstance(loaded, dict):
            raise CliError(f"--from {args.source!r} must hold a JSON object")
        return loaded
    if not args.type:
        raise CliError("give --type with --field K=V (the secret is asked for), or --from FILE|- with JSON")
    data: dict[str, Any] = {"type": args.type}
    for item in args.field:
        key, sep, value = item.partition("=")
        if not sep:
            raise CliError(f"--field {item!r} must be K=V")
        data[key] = value.replace(",", " ").split() if key in ("scopes", "hosts") else value
    secret = SECRET_PROMPTS[args.type]
    if secret in data:
        raise CliError(
            f"--field {secret}=... would put the secret in the shell history; it is asked for instead"
        )
    import getpass

    data[secret] = (
        getpass.getpass(f"{secret} for {args.name!r}: ")
        if sys.stdin.isatty()
        else sys.stdin.readline().rstrip("\r\n")
    )
    return data


def _import(args: argparse.Namespace, registry: Any) -> int:
    from echo_tools.openapi import import_openapi_report

    report = import_openapi_report(
        registry,
        args.spec,
        provider=args.provider,
        base_url=args.base_url,
        credential=args.credential,
        operations=args.operation,
    )
    if args.json:
        sys.stdout.write(
            json.dumps(
                {
                    "provider": args.provider,
                    "tools": [t.tool_id for t in report.tools],
                    "skipped": [{"pointer": p, "reason": r} for p, r in report.skipped],
                    "disabled": report.disabled,
                },
                indent=2,
            )
            + "\n"
        )
        return 0
    sys.stdout.write(f"Imported {len(report.tools)} tools from {args.spec} as provider {args.provider!r}:\n")
    for tool in report.tools:
        sys.stdout.write(f"  {tool.tool_id}  {tool.metadata.get('method')} {tool.metadata.get('path')}\n")
    for tool_id in report.disabled:
        sys.stdout.write(f"Disabled {tool_id}: its operation is no longer in the spec\n")
    for where, why in report.skipped:
        sys.stderr.write(f"echo-tools: warning: skipped {where}: {why}\n")
    return 0
