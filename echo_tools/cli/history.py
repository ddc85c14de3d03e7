"""Where the CLI keeps things, and the commands that read the run history: `runs`, `events`, `migrate`.

Embedded by default: the JSON tool store of `--storage` plus `<storage>/runs.sqlite` (the event history).
With `--database-url` (or `ECHO_TOOLS_DATABASE_URL`) everything is in PostgreSQL instead. The stores a
command opens are kept on its `args` and closed by `close_stores(args)` when the command ends.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

POSTGRES_HINT = "pip install 'echo-tools[postgres]' (from a clone: make install)"


def opened(args: argparse.Namespace) -> dict[str, Any]:
    """What this command opened (`pg_stores`, `history`, `feeds`): one dict shared by copies of `args`
    made after it exists (`main` makes it first)."""
    held = getattr(args, "cli_opened", None)
    if held is None:
        held = args.cli_opened = {}
    return held


def check_history_days(args: argparse.Namespace) -> float:
    """`--history-days`, a positive number of days, or a usage error naming it."""
    from echo_tools.cli.common import CliError

    days = getattr(args, "history_days", None)
    if days is None:
        from echo_tools.history import DEFAULT_RETENTION_DAYS

        return DEFAULT_RETENTION_DAYS
    if not days > 0:
        raise CliError(f"--history-days must be a positive number of days, got {days!r}", code=2)
    return float(days)


def pg_stores(args: argparse.Namespace) -> Any:
    """The PostgreSQL stores of `--database-url` / `ECHO_TOOLS_DATABASE_URL` (opened once), or None."""
    from echo_tools.pg.wiring import database_url

    url = database_url(getattr(args, "database_url", None))
    if url is None:
        return None
    held = opened(args)
    if "pg_stores" not in held:
        held["pg_stores"] = open_stores_or_fail(url, check_history_days(args))
    return held["pg_stores"]


def open_stores_or_fail(url: str, days: float) -> Any:
    """`open_stores(url)`, with a missing driver or a database that cannot be used as a usage error."""
    from echo_tools.cli.common import CliError
    from echo_tools.errors import ToolStorageError

    try:
        from echo_tools.pg.wiring import open_stores

        return open_stores(url, history_days=days)
    except ImportError as exc:
        raise CliError(f"--database-url needs the postgres extra: {POSTGRES_HINT} ({exc})", code=2) from exc
    except ToolStorageError as exc:  # names host and database, never the password
        raise CliError(f"--database-url: {exc.message}", code=2) from exc


def run_history(args: argparse.Namespace, *, required: bool = True) -> Any:
    """The event history of this storage (opened once, pruned past `--history-days` when opened):
    PostgreSQL's with a database URL, else `<storage>/runs.sqlite`.

    Not `required` (calls and `serve`), a `runs.sqlite` that cannot be opened (a read-only storage
    folder) is a warning and None: the calls still run, unrecorded.
    """
    import sqlite3

    from echo_tools.errors import ToolStorageError

    stores = pg_stores(args)
    if stores is not None:
        return stores.history
    held = opened(args)
    history = held.get("history")
    if history is None and not required and held.get("history_unavailable"):
        return None  # already warned
    if history is None:
        from echo_tools.cli.common import PROG, storage_dir
        from echo_tools.history import RunHistory

        days = check_history_days(args)
        try:
            history = RunHistory(storage_dir(args))
            history.prune(days=days)
        except (ToolStorageError, sqlite3.Error) as exc:  # a read-only folder, a damaged file
            if history is not None:
                history.close()
            if required:
                raise
            sys.stderr.write(f"{PROG}: warning: calls are not kept in the run history: {exc}\n")
            held["history_unavailable"] = True
            return None
        held["history"] = history
    return history


FLUSH_WAIT_S = 10.0


def feeds_history(args: argparse.Namespace, bus: Any) -> None:
    """Note an `EventBus` that delivers to the history, so `close_stores` waits for its queued events."""
    opened(args).setdefault("feeds", []).append(bus)


def close_stores(args: argparse.Namespace) -> None:
    """Close what `pg_stores` and `run_history` opened for this command, once the events queued for
    them were delivered (an executor on an event loop delivers from a background thread)."""
    held = opened(args)
    for bus in held.pop("feeds", []):
        bus.flush(FLUSH_WAIT_S)
    for name in ("history", "pg_stores"):
        resource = held.pop(name, None)
        if resource is not None:
            resource.close()


def where(args: argparse.Namespace) -> str:
    """Where the stores are, for messages: the database's host and name, or the storage folder."""
    stores = pg_stores(args)
    if stores is not None:
        from echo_tools.pg.database import describe

        return describe(stores.db.dsn)
    from echo_tools.console import storage_choice

    return storage_choice(args).describe()


# -- commands ----------------------------------------------------------------------------------------


def cmd_runs(args: argparse.Namespace) -> int:
    """`echo-tools runs [--status S] [--workflow ID]`: the runs, newest first; `runs show RUN_ID`: one run;
    `runs cancel RUN_ID`: cancel a run paused at a HITL node."""
    from echo_tools.cli.common import CliError

    action = getattr(args, "action", None)
    if action is not None:
        if not getattr(args, "run_id", None):
            raise CliError(f"runs {action} needs a RUN_ID", code=2)
        return cancel_run(args) if action == "cancel" else show_run(args)
    if getattr(args, "run_id", None):
        raise CliError(f"runs takes show or cancel before a run id, got {args.run_id!r}", code=2)
    return list_runs(args)


def list_runs(args: argparse.Namespace) -> int:
    """The runs table (or `{"runs": [...]}` with `--json`)."""
    from echo_tools.cli.common import CliError, print_json

    history = run_history(args)
    try:
        summaries = history.runs(
            workflow_id=args.workflow, status=getattr(args, "status", None), limit=args.limit
        )
    except ValueError as exc:
        option = "--status" if str(exc).startswith("status") else "--limit"
        raise CliError(f"runs {option}: {exc}", code=2) from exc
    rows = [summary.to_dict() for summary in summaries]
    if args.json:
        print_json({"runs": rows})
        return 0
    header = ("RUN_ID", "WORKFLOW", "STATUS", "CALLS", "FAILED", "LAST_EVENT")
    table = [header] + [
        (
            r["run_id"],
            r["workflow_id"] or "-",
            r["status"] or "-",
            str(r["calls"]),
            str(r["failed"]),
            r["last_event"],
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        sys.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
    sys.stdout.write(f"{len(rows)} runs\n")
    return 0


def cancel_run(args: argparse.Namespace) -> int:
    """`runs cancel RUN_ID`: a paused run becomes `cancelled` (it can no longer be resumed)."""
    from echo_tools.cli.common import CliError

    history = run_history(args)
    run_id = args.run_id
    record = history.run(run_id)
    if record is None:
        raise CliError(f"no recorded run has run_id {run_id!r}")
    if not history.claim_run(run_id, "interrupted", "cancelled"):
        now = (history.run(run_id) or record)["status"]
        raise CliError(f"run {run_id!r} is {now!r}, not 'interrupted': only a paused run can be cancelled")
    sys.stdout.write(f"run {run_id} cancelled\n")
    return 0


def show_run(args: argparse.Namespace) -> int:
    """`runs show RUN_ID`: one run (see `echo_tools.cli.run_view`)."""
    from echo_tools.cli.run_view import show_run as show

    return show(run_history(args), args.run_id, as_json=args.json)


def cmd_events_history(args: argparse.Namespace) -> int:
    """`echo-tools events [--run ID] [--tool ID] [--agent ID] [--since T] [--limit N] [--oldest-first]`:
    the history, newest first (the latest N events)."""
    from echo_tools.cli.common import CliError, print_json
    from echo_tools.cli.output import format_event_line

    history = run_history(args)
    try:
        events = history.events(
            run_id=args.run_id,
            tool_id=args.tool,
            agent_id=args.agent,
            since=args.since,
            limit=args.limit if args.limit is not None else 100,
            newest_first=not getattr(args, "oldest_first", False),
        )
    except ValueError as exc:
        option = "--since" if str(exc).startswith("since") else "--limit"
        raise CliError(f"events {option}: {exc}", code=2) from exc
    if args.json:
        print_json({"events": [e.to_dict() for e in events]})
        return 0
    for event in events:
        sys.stdout.write(format_event_line(event.to_dict()) + "\n")
    sys.stdout.write(f"{len(events)} events\n")
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """`echo-tools migrate --to URL` (from `--storage`) or `--from URL --to DIR`: copy the catalogue."""
    from echo_tools.cli.common import CliError, print_json, storage_dir
    from echo_tools.errors import ToolStorageError

    source: str | Path = args.source if args.source else storage_dir(args)
    try:
        from echo_tools.pg import migrate
    except ImportError as exc:
        raise CliError(f"migrate needs the postgres extra: {POSTGRES_HINT} ({exc})", code=2) from exc
    try:
        report = migrate(source, args.target)
    except ToolStorageError as exc:
        raise CliError(f"migrate: {exc.message}", code=2) from exc
    print_json(report.to_dict())
    if report.problems:
        sys.stderr.write(f"echo-tools: migrate copied with {len(report.problems)} problem(s), listed above\n")
        return 1
    return 0
