"""`echo-tools run`, `resume`, `compile` and `demo`: workflows from files, with nodes and tool calls live.

The workflow bridge (LangGraph, CrewAI) is imported only here, inside the commands. With no LLM configured
the run uses the offline rehearsal model, announced before the run starts; the tools always run for real.
Runs are recorded in `<storage>/runs.sqlite`, so a run paused at a HITL node is resumed by `resume`.
"""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workflow_bridge.shapes import compile_summary, diagnostic_dict

DEMO_SAMPLE = Path("sample_workflows") / "code_pipeline.canvas.json"


def load_source(path_text: str) -> dict[str, Any]:
    """A workflow file as a JSON object (canvas payload, canvas export or `{workflow, agents}`)."""
    from echo_tools.console import read_json_object

    return read_json_object(Path(path_text), "workflow file")


def runner() -> Any:
    from echo_tools.console import CliError
    from echo_tools.extras import missing_extra

    try:
        import workflow_bridge.runner as module  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        raise CliError(
            f"the workflow runner is not available: {missing_extra(exc, 'echo-tools run')}"
        ) from exc
    return module


def compile_error() -> type[Exception]:
    from workflow_bridge.compiler import WorkflowCompileError

    return WorkflowCompileError


def cmd_compile(args: argparse.Namespace) -> int:
    from echo_tools.cli import open_executor, open_registry
    from echo_tools.console import print_json

    source = load_source(args.file)
    registry = open_registry(args)
    executor = open_executor(registry, args)
    module = runner()
    names: dict[str, str] = {}
    try:
        graph, mapped = module.compile_source(source, registry, executor)
        summary = compile_summary(graph, mapped)
        names = {str(i): str(a.get("name")) for i, a in mapped.agents.items() if a.get("name")}
    except (module.WorkflowSourceError, compile_error()) as exc:
        diagnostics = getattr(exc, "diagnostics", None)
        if not diagnostics:
            raise
        summary = {"diagnostics": [diagnostic_dict(d) for d in diagnostics], "nodes": [], "edges": []}
    finally:
        executor.close()
    if args.json:
        print_json(summary)
    else:
        for d in summary["diagnostics"]:
            where = ".".join(str(p) for p in (d.get("node_id"), d.get("field")) if p)
            sys.stdout.write(f"{d.get('level', '?'):<8} {where or '-'}: {d.get('message')}\n")
        sys.stdout.write(f"{len(summary['nodes'])} nodes, {len(summary['edges'])} edges\n")
        for edge in summary["edges"]:
            arrow = "-?->" if edge.get("conditional") else "--->"
            source_, target = (_labelled(edge[k], names) for k in ("source", "target"))
            sys.stdout.write(f"  {source_} {arrow} {target}\n")
    errors = [d for d in summary["diagnostics"] if d.get("level") == "error"]
    return 1 if errors else 0


def _labelled(node_id: str, names: dict[str, str]) -> str:
    # a canvas name tells a person which node `agt_5f3a...` is; the id stays for scripts
    name = names.get(node_id)
    return f"{name!r} ({node_id})" if name and name != node_id else node_id


def cmd_run(args: argparse.Namespace) -> int:
    """Run the workflow, printing `run.*`, `node.*` and `tool.*` events as they happen (the model in use
    first, the rehearsal notice among them when no LLM is configured), then the final `crew_result`.

    Exit code 0 when the run is `completed` or `interrupted` (paused at a HITL node: the run id is printed;
    `echo-tools resume RUN_ID` carries it on), 1 otherwise (`completed_with_errors`, `failed`,
    `cancelled`). The run is recorded in `<storage>/runs.sqlite` (or PostgreSQL, `--database-url`).
    """
    source = load_source(args.file)
    run_id = getattr(args, "run_id", None) or f"run_{uuid.uuid4().hex[:12]}"

    def start(module: Any, history: Any, live: dict[str, Any]) -> Any:
        return module.run_workflow(
            source, user_input=args.input, run_id=run_id, check_llms=True, history=history, **live
        )

    return _run_live(args, run_id, start)


def _answer(text: str) -> dict[str, Any]:
    """`--answer`: `decline`, `cancel`, or the form's fields as a JSON object (accepted)."""
    from echo_tools.console import CliError

    if text.strip() in ("decline", "cancel"):
        return {"decision": text.strip()}
    try:
        content = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"--answer must be a JSON object, decline or cancel, got {text!r:.80}: {exc.msg}", 2
        ) from exc
    if not isinstance(content, dict):
        raise CliError(f"--answer must be a JSON object, decline or cancel, got {text!r:.80}", code=2)
    return {"decision": "accept", "content": content}


def cmd_resume(args: argparse.Namespace) -> int:
    """Resume a run paused at a HITL node (from any process) with `--approve`, `--reject` or `--edit JSON`;
    the rest runs live as `run` shows it, then the final `crew_result`. Same exit codes as `run`."""
    from echo_tools.console import CliError

    decision: Any
    if args.answer is not None:
        decision = _answer(args.answer)
    elif args.edit is not None:
        try:
            edits = json.loads(args.edit)
        except json.JSONDecodeError as exc:
            raise CliError(f"--edit must be a JSON object, got {args.edit!r:.80}: {exc.msg}", code=2) from exc
        if not isinstance(edits, dict):
            raise CliError(f"--edit must be a JSON object, got {args.edit!r:.80}", code=2)
        decision = {"decision": "edit", "edits": edits}
    else:
        decision = "approve" if args.approve else "reject"
    if args.comment is not None:
        decision = {**({"decision": decision} if isinstance(decision, str) else decision)}
        decision["comment"] = args.comment

    def carry_on(module: Any, history: Any, live: dict[str, Any]) -> Any:
        return module.resume_run(args.run_id, decision, storage=history, **live)

    return _run_live(args, args.run_id, carry_on)


def cmd_replay(args: argparse.Namespace) -> int:
    """Run a recorded run's workflow again under a new run id, answering each tool call from the recorded
    events (no tool runs) and applying the recorded HITL decisions; prints the final `crew_result`."""
    run_id = getattr(args, "new_run_id", None) or f"run_{uuid.uuid4().hex[:12]}"

    def again(module: Any, history: Any, live: dict[str, Any]) -> Any:
        return module.replay_run(args.run_id, storage=history, new_run_id=run_id, **live)

    return _run_live(args, run_id, again)


def _run_live(args: argparse.Namespace, run_id: str, go: Callable[..., Any]) -> int:
    """Open the registry, executor and run history of `--storage`, call `go(runner module, history, live)`
    and print how the run ended; the shared body of `run`, `resume` and `replay`. `live` holds the runner's
    keyword arguments they share: `registry`, `executor`, `llm` (`--llm`) and `on_event` (a live printer)."""
    from echo_tools.cli import (
        LivePrinter,
        open_executor,
        open_registry,
        quiet_framework_logs,
        quiet_rehearsal_log,
        refused_hint,
        run_history,
    )
    from echo_tools.console import CliError, storage_choice, use_rich

    registry = open_registry(args)
    events_file = getattr(args, "events", None)
    # the run's events file is written from the run's stream, where tool events carry the agent's name
    executor = open_executor(registry, argparse.Namespace(**{**vars(args), "events": None}))
    printer = LivePrinter(use_rich())
    finished: dict[str, Any] = {}  # the last `run.finished` event: how the run ended, in the one vocabulary
    shown = printer if not events_file else _also_to_file(printer, Path(events_file))

    def on_event(event: dict[str, Any]) -> None:
        if event.get("type") == "run.finished":
            finished.clear()
            finished.update(event)
        shown(event)

    module = runner()
    quiet_rehearsal_log()  # the runner also logs the notice; the printer shows it once, from the event
    quiet_framework_logs()
    history = run_history(args)  # PostgreSQL's with --database-url, else <storage>/runs.sqlite
    live = {"registry": registry, "executor": executor, "llm": args.llm, "on_event": on_event}
    try:
        state = go(module, history, live)
    except KeyboardInterrupt:
        if finished.get("status") != "cancelled":
            raise
        printer.note(f"run {run_id} cancelled (interrupted)")
        return 1
    except Exception as exc:  # boundary: the run's own errors become the command's one-line error
        stopped = finished.get("status")
        if not (_is_run_error(exc) or stopped):
            raise
        hint = refused_hint(registry)
        message = (f"run {run_id} {stopped}: " if stopped else "") + str(exc)
        raise CliError(message + (f" (note: {hint})" if hint else "")) from exc
    finally:
        executor.close()  # the history is closed with the command's other stores (`close_stores`)
    status = finished.get("status") or ("interrupted" if state.get("__interrupt__") else "completed")
    if not getattr(args, "database_url", None):  # where the run is recorded: `runs show` looks there too
        printer.note(f"run {run_id} is recorded in the storage {storage_choice(args).describe()}")
    _report(printer, run_id, status, state, finished)
    return int(module.exit_code(status))


def _report(printer: Any, run_id: str, status: str, state: Any, finished: dict[str, Any]) -> None:
    """How the run ended: the resume hint of a paused run, else its `crew_result`, and the failures."""
    if status == "interrupted":
        from workflow_bridge.decisions import waiting_for

        pauses = waiting_for(state if isinstance(state, dict) else {}, run_id) or [
            {"what": "a decision", "how": f"echo-tools resume {run_id} --approve | --reject | --edit JSON"}
        ]
        for pause in pauses:
            printer.note(f"run {run_id} interrupted, waiting for {pause['what']}: {pause['how']}")
    else:
        result = state.get("crew_result") if isinstance(state, dict) else state
        body = result if isinstance(result, str) else json.dumps(result, indent=2, default=str)
        printer.panel(f"crew_result (run {run_id})", body)
    if status == "completed_with_errors":
        failures = printer.failures or [str(finished.get("error"))]
        printer.note(
            f"run {run_id} completed_with_errors: {len(failures)} failure(s): {', '.join(failures)}; "
            "see the lines marked above"
        )


def _is_run_error(exc: BaseException) -> bool:
    # errors the bridge raises with a complete sentence: shown as they are, without a type name
    from echo_tools.errors import ToolNotFoundError
    from workflow_bridge.compiler import WorkflowCompileError
    from workflow_bridge.conditions import ConditionError
    from workflow_bridge.crewai_adapter import AgentNodeError
    from workflow_bridge.llm import LLMConfigError
    from workflow_bridge.replay import ReplayMismatchError
    from workflow_bridge.runner import RunResumeError, WorkflowSourceError

    return isinstance(
        exc,
        (
            RunResumeError,
            ReplayMismatchError,
            WorkflowCompileError,
            ConditionError,
            AgentNodeError,
            LLMConfigError,
            WorkflowSourceError,
            ToolNotFoundError,
        ),
    )


def _also_to_file(printer: Any, path: Path) -> Any:
    """The printer, also appending each tool event as a JSON line to `path` (`run --events FILE`)."""
    import threading

    path.parent.mkdir(parents=True, exist_ok=True)
    lock = threading.Lock()

    def on_event(event: dict[str, Any]) -> None:
        printer(event)
        if str(event.get("type", "")).startswith("tool."):
            line = json.dumps(event, ensure_ascii=False, default=str) + "\n"
            with lock, path.open("a", encoding="utf-8") as fh:
                fh.write(line)

    return on_event


def cmd_demo(args: argparse.Namespace) -> int:
    """Discover AgentTools into the storage and run the sample workflow offline, recorded in its run
    history (or, without the workflow runner, list the tools and invoke the calculator once)."""
    from echo_tools.cli import cmd_list, open_executor, open_registry
    from echo_tools.console import print_json, storage_choice

    # the default storage (or --storage): its run is then where `echo-tools runs` looks
    sys.stdout.write(f"echo-tools demo: storage {storage_choice(args).describe()}\n")
    registry = open_registry(args)
    found = registry.discover_local_tools()
    sys.stdout.write(f"Discovered {len(found)} AgentTools: {', '.join(t.tool_id for t in found)}\n")
    sample = _sample_path(args.sample)
    if sample is not None:
        run_id = f"run_demo_{uuid.uuid4().hex[:8]}"
        args.file, args.input, args.llm, args.run_id = str(sample), None, None, run_id
        code = cmd_run(args)
        sys.stdout.write(f"\nsee this run again: echo-tools runs show {run_id} (all runs: echo-tools runs)\n")
        return code
    cmd_list(argparse.Namespace(**{**vars(args), "type": None, "json": False}))
    executor = open_executor(registry, args)
    data = {"operation": "add", "values": [2, 3, 4.5]}
    sys.stdout.write(f"\ninvoke tool_calculator {json.dumps(data)}\n")
    try:
        result = executor.invoke_sync("tool_calculator", data)
    finally:
        executor.close()
    print_json(result.model_dump(mode="json"))
    return 0 if result.success else 1


def _sample_path(given: str | None) -> Path | None:
    if given:
        return Path(given)
    for base in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (base / DEMO_SAMPLE).is_file():
            return base / DEMO_SAMPLE
    return None


def dispatch(args: argparse.Namespace) -> int:
    """Run the workflow command `args.command` names."""
    commands: dict[str, Callable[[argparse.Namespace], int]] = {
        "run": cmd_run,
        "resume": cmd_resume,
        "replay": cmd_replay,
        "compile": cmd_compile,
        "demo": cmd_demo,
    }
    return int(commands[args.command](args))


def add_parsers(sub: Any) -> None:
    """`run`, `resume`, `replay`, `compile` and `demo`: added to `echo-tools` through the entry point
    `echo_tools.commands` (the command line itself knows nothing of workflows)."""
    run = sub.add_parser("run", help="run a canvas or workflow JSON file, showing nodes and tool calls live")
    run.add_argument("file", metavar="FILE", help="canvas payload, canvas export or {workflow, agents} JSON")
    run.add_argument("--input", metavar="TEXT", help="the user input of the run")
    run.add_argument(
        "--llm",
        metavar="SPEC",
        help="model, e.g. openai/gpt-4o-mini (default: $ECHO_LLM or the offline rehearsal model)",
    )
    run.add_argument("--events", metavar="FILE", help="append the run's tool events to this JSONL file")
    run.add_argument("--run-id", help="the run id (default: generated)")

    resume = sub.add_parser(
        "resume", help="resume a run paused at a HITL node (recorded in the storage's runs.sqlite)"
    )
    resume.add_argument("run_id", metavar="RUN_ID", help="the run id `run` printed when it paused")
    decision = resume.add_mutually_exclusive_group(required=True)
    decision.add_argument("--approve", action="store_true", help="approve the paused result")
    decision.add_argument("--reject", action="store_true", help="reject it: the run ends")
    decision.add_argument(
        "--edit", metavar="JSON", help='replace the result: a JSON object, e.g. {"crew_result": "..."}'
    )
    decision.add_argument(
        "--answer",
        metavar="JSON|decline|cancel",
        help="answer an MCP server's question the run is paused at: the form's fields as a JSON object "
        "(accepted), or decline / cancel",
    )
    resume.add_argument("--comment", metavar="TEXT", help="the reviewer's comment")
    resume.add_argument("--llm", metavar="SPEC", help="model (default: the one the run started with)")
    resume.add_argument("--events", metavar="FILE", help="append the run's tool events to this JSONL file")

    replay = sub.add_parser(
        "replay", help="run a recorded run again, each tool call answered from its recorded events"
    )
    replay.add_argument("run_id", metavar="RUN_ID", help="the recorded run")
    replay.add_argument("--run-id", dest="new_run_id", help="the new run's id (default: generated)")
    replay.add_argument("--llm", metavar="SPEC", help="model (default: the one the run started with)")
    replay.add_argument("--events", metavar="FILE", help="append the replay's tool events to this JSONL file")

    compile_ = sub.add_parser(
        "compile", help="map and compile a workflow file; print diagnostics, nodes and edges"
    )
    compile_.add_argument("file", metavar="FILE")
    compile_.add_argument("--json", action="store_true", help="print JSON")

    demo = sub.add_parser("demo", help="discover AgentTools and run the sample workflow offline (make demo)")
    demo.add_argument(
        "--sample",
        metavar="FILE",
        help="workflow to run (default: sample_workflows/code_pipeline.canvas.json)",
    )
    demo.add_argument("--events", metavar="FILE", help="append the run's tool events to this JSONL file")
    for parser in (run, resume, replay, compile_, demo):
        parser.set_defaults(func=dispatch)
