"""`python -m echo_tools.pg`: set up, check and fill a PostgreSQL database before the CLI wires it in.

    python -m echo_tools.pg check URL                  connect, migrate the schema, print what is stored
    python -m echo_tools.pg migrate SOURCE TARGET      copy a JSON store folder to a URL, or a URL to a folder
    python -m echo_tools.pg prune URL [--days 30]      forget events older than the retention

Errors are one line on stderr naming host and database, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys

from echo_tools.errors import ToolError
from echo_tools.history import DEFAULT_RETENTION_DAYS


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m echo_tools.pg", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="connect, migrate the schema, print what is stored")
    check.add_argument("url")
    migrate = commands.add_parser("migrate", help="copy a JSON store to PostgreSQL, or back")
    migrate.add_argument("source", help="a JSON store folder or a postgresql:// URL")
    migrate.add_argument("target", help="a postgresql:// URL or a JSON store folder")
    prune = commands.add_parser("prune", help="forget events older than --days")
    prune.add_argument("url")
    prune.add_argument("--days", type=float, default=DEFAULT_RETENTION_DAYS)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from echo_tools.pg import PgDatabase, PgRunHistory, PgToolStorage, migrate
    from echo_tools.pg.schema import schema_versions

    try:
        if args.command == "migrate":
            report = migrate(args.source, args.target)
            print(json.dumps(report.to_dict(), indent=2))
            return 1 if report.problems else 0
        with PgDatabase(args.url) as db:
            if args.command == "prune":
                print(json.dumps({"pruned": PgRunHistory(db).prune(days=args.days)}))
                return 0
            storage = PgToolStorage(db, listen=False)
            tools, problems = storage.load_all()
            with db.connection() as conn:
                versions = schema_versions(conn)
            print(
                json.dumps(
                    {
                        "database": db.where,
                        "schema_version": versions[-1],
                        "tools": len(tools),
                        "problems": [str(p) for p in problems],
                        "mcp_servers": sorted(storage.mcp_configs.load()),
                        "events": PgRunHistory(db).count(),
                    },
                    indent=2,
                )
            )
            return 0
    except (ToolError, ValueError) as exc:
        sys.stderr.write(f"echo-tools: {getattr(exc, 'message', exc)}\n")
        return 2


if __name__ == "__main__":
    sys.exit(main())
