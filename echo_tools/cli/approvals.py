"""`echo-tools approvals list | approve | reject`: the calls waiting for a person, decided from any process.

Approvals live beside the run history (`<storage>/runs.sqlite`, or PostgreSQL with `--database-url`), so
this command decides what another process asked: `echo-tools invoke` of a tool that needs approval, or a
workflow run paused at a tool call. An approved call made outside a run runs here, once, and its result
is printed; an approval of a paused run is decided, then the run is carried on as `echo-tools resume`
does (its nodes and tool calls shown live).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from echo_tools.cli.common import PROG, CliError, print_json

_GLOBAL_OPTIONS = (
    "storage", "allow_module", "allow_module_late", "database_url", "history_days", "debug", "cli_opened",
)  # fmt: skip


def add_approvals_parser(sub: Any) -> None:
    """`approvals` and its subcommands, on the `echo-tools` subparsers."""
    parser = sub.add_parser("approvals", help="list, approve or reject tool calls waiting for a person")
    actions = parser.add_subparsers(dest="approvals_command", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="the pending approvals, oldest first")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    listing.add_argument("--limit", type=int, default=100, help="at most this many (default 100)")
    listing.set_defaults(func=cmd_list)
    for name, helptext in (("approve", "approve a call (it runs, once)"), ("reject", "reject a call")):
        p = actions.add_parser(name, help=helptext)
        p.add_argument("approval_id", metavar="APPROVAL_ID", help="the id `approvals list` shows")
        p.add_argument("--comment", metavar="TEXT", help="the reviewer's comment (the model reads it)")
        if name == "approve":
            p.add_argument("--edit", metavar="JSON", help="run the call with these arguments instead")
        p.set_defaults(func=cmd_decide, decision=name)


def cmd_list(args: argparse.Namespace) -> int:
    from echo_tools.cli.catalogue import open_executor, open_registry

    executor = open_executor(open_registry(args), args)
    try:
        pending = executor.governance.approvals.pending(max(1, args.limit))
    finally:
        executor.close()
    if args.json:
        print_json({"approvals": [record.to_dict() for record in pending]})
        return 0
    if not pending:
        sys.stdout.write("no pending approvals\n")
    for record in pending:
        who = f" by {record.agent_name}" if record.agent_name else ""
        run = f" in run {record.run_id}" if record.run_id else ""
        args_text = json.dumps(record.args, ensure_ascii=False)[:200]
        sys.stdout.write(f"{record.approval_id}  {record.tool_id}{who}{run}  {args_text}\n")
    return 0


def cmd_decide(args: argparse.Namespace) -> int:
    from echo_tools.cli.catalogue import open_executor, open_registry
    from echo_tools.governance.approvals import ApprovalDecisionError

    decision, edits = args.decision, _edits(getattr(args, "edit", None))
    if edits is not None:
        decision = "edit"
    executor = open_executor(open_registry(args), args)
    try:
        record, result = executor.decide(
            args.approval_id, decision, args=edits, comment=args.comment, by="cli"
        )
    except ApprovalDecisionError as exc:
        raise CliError(str(exc), code=2 if exc.status == 422 else 1) from exc
    finally:
        executor.close()
    sys.stdout.write(f"approval {record.approval_id} {record.status} ({record.tool_id})\n")
    if record.note:  # decided here, run where the tool is: the process that asked carries it out
        sys.stdout.write(f"the call did not run here: {record.note}\n")
    if result is not None:
        print_json(result.model_dump(mode="json"))
        return 0 if result.success else 1
    if record.kind == "run" and record.run_id:
        from echo_tools.cli.history import run_history

        history = run_history(args, required=False)
        if history is not None and history.run(record.run_id) is not None:  # a recorded workflow run
            return _resume(args, record.run_id, decision, edits)
        # a graph of the host's own (create_agent, a StateGraph): the host resumes it
        sys.stdout.write(
            f"run {record.run_id} is not a recorded workflow run: resume its graph with "
            'Command(resume="decided") to carry the decision on\n'
        )
    return 0


def _edits(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        edits = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"--edit must be a JSON object, got {text!r:.80}: {exc.msg}", code=2) from exc
    if not isinstance(edits, dict):
        raise CliError(f"--edit must be a JSON object, got {text!r:.80}", code=2)
    return edits


def _resume(args: argparse.Namespace, run_id: str, decision: str, edits: dict[str, Any] | None) -> int:
    """Carry the paused run on with the decision, through the `resume` command the workflow bridge adds."""
    from echo_tools.cli.parsers import add_plugin_parsers

    flag = {"approve": ["--approve"], "reject": ["--reject"], "edit": ["--edit", json.dumps(edits)]}[decision]
    parser = argparse.ArgumentParser(prog=f"{PROG} approvals")
    add_plugin_parsers(parser.add_subparsers(dest="command"))  # `resume` comes from the workflow bridge
    try:
        resume = parser.parse_args(["resume", run_id, *flag])
    except SystemExit as exc:  # no `resume` command: the workflow bridge is not installed
        raise CliError(
            f"run {run_id!r} stays paused: resuming it needs the workflow bridge (echo-tools resume)"
        ) from exc
    for key in _GLOBAL_OPTIONS:  # as given to this command, and what it opened
        if hasattr(args, key):
            setattr(resume, key, getattr(args, key))
    resume.comment = args.comment
    return int(resume.func(resume))
