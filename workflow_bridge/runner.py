"""Running a workflow from a canvas, a workflow + agents pair, or a JSON file: the API the CLI calls.

`compile_source` turns any accepted source into a compiled graph (canvas payloads go through NodeMapper;
its errors are raised with the diagnostics listed). `run_workflow` runs it as EchoAI's runtime does and
reports progress to `on_event` as it happens: node start and finish (LangGraph's custom stream), every
tool event of the run (an executor sink), a rehearsal notice when no LLM is configured, and the end.
With a `RunHistory` the run is recorded (source, status, tool events) and checkpointed in SQLite, so
`resume_run` can carry on a paused run from any process.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from echo_tools.errors import ScopeRestoreError
from echo_tools.events import ToolEvent
from echo_tools.gate import CallScope, PrincipalLookup, Seal, acting, current_scope
from workflow_bridge.decisions import (
    ELICITATION_ACTIONS,
    HITL_DECISIONS,
    RunResumeError,
    check_allowed,
    check_answer,
    check_decision,
    elicitation,
    waiting_for,
)
from workflow_bridge.llm import describe_llm
from workflow_bridge.run_scope import kept, restored, running, seal_of
from workflow_bridge.run_source import (
    WorkflowSourceError,
    check_models,
    compile_source,
    default_input,
    load_source,
    map_source,
    models_of,
    uses_rehearsal,
)
from workflow_bridge.run_stream import (
    RUN_STATUSES,
    EventCallback,
    exit_code,
    stream_run,
)
from workflow_bridge.state import initial_state

__all__ = [
    "ELICITATION_ACTIONS",
    "HITL_DECISIONS",
    "RUN_STATUSES",
    "RunResumeError",
    "WorkflowSourceError",
    "check_answer",
    "check_decision",
    "check_models",
    "check_owner",
    "cancel_run",
    "compile_source",
    "exit_code",
    "load_source",
    "map_source",
    "models_of",
    "replay_run",
    "resume_run",
    "resume_workflow",
    "run_status",
    "run_workflow",
    "stream_run",
    "uses_rehearsal",
]

logger = logging.getLogger("workflow_bridge.runner")

_F = TypeVar("_F", bound=Callable[..., Any])


def run_workflow(
    source: Mapping[str, Any] | str | Path,
    *,
    registry: Any,
    executor: Any,
    user_input: str | None = None,
    llm: Any = None,
    on_event: EventCallback | None = None,
    run_id: str | None = None,
    payload: Mapping[str, Any] | None = None,
    missing_agents: str = "error",
    check_llms: bool = False,
    history: Any = None,
    owner: str | None = None,
    scope: CallScope | None = None,
) -> dict[str, Any]:
    """Compile and run a workflow; returns the final state (with `__interrupt__` when a HITL node paused).

    Args:
        source: canvas payload or export, `{workflow, agents}`, or a path to a JSON file holding one.
        user_input: the request (EchoAI's `message`); default: found in `payload` as EchoAI does.
        llm: a model or spec for every agent (`"openai/gpt-4o-mini"`, `"rehearsal"`); default each agent's.
        on_event: called with dicts as things happen: `type` is `run.started`, `llm.rehearsal`,
            `node.started`, `node.finished`, `tool.*` (the executor event), `run.interrupted`, `run.finished`.
        run_id: the LangGraph thread id and the run id in every event; default a new `run_<hex>`.
        payload: extra input keys (EchoAI's `input_payload`).
        check_llms: check every model before the run (`check_models`): an unreachable server or a
            missing API key fails in one sentence instead of once per agent call.
        history: a `echo_tools.history.RunHistory` (or an object with its API): the graph is checkpointed
            with `history.checkpointer()`, and the run, its tool events and its status (`RUN_STATUSES`,
            see `run_stream`) are recorded, so `resume_run` can carry it on from another process.
        owner: the run's owner (only it or an admin may resume or read it); default the scope's
            principal, else the one acting now (the CLI and in-process Python: the operator).
        scope: the run's `echo_tools.gate.CallScope` (ceiling, one budget for the whole run, end user);
            default the scope acting now (a request's). Kept with the run: a resume goes on under it.

    Raises:
        LLMConfigError: `check_llms`, and a model cannot be used.
        RunResumeError: 409 (`run_id`): the history already holds a run with this id (nothing runs, the
            recorded run is left as it was).
    """
    data = load_source(source)
    checkpointer = history.checkpointer() if history is not None else None
    graph, mapped = compile_source(
        data, registry, executor, llm=llm, missing_agents=missing_agents, checkpointer=checkpointer,
        state_keys=list(payload or {}),
    )  # fmt: skip
    if user_input is None and not payload:
        # sample canvases carry a ready request, so `echo-tools run FILE` works without --input
        user_input = default_input(data) or default_input(mapped.workflow)
    run_id = run_id or f"run_{uuid.uuid4().hex}"
    workflow_id = mapped.workflow.get("workflow_id")
    state = initial_state(user_input, workflow_id, run_id, **dict(payload or {}))
    models = sorted({describe_llm(m) for m in models_of(graph).values()})
    name = mapped.workflow.get("name")
    start = {"type": "run.started", "run_id": run_id, "workflow_id": workflow_id, "name": name, "models": models}  # fmt: skip
    given = scope or current_scope()
    scope = given.within(run_id=run_id) if given is not None else None
    keep = None
    if history is not None:
        stored = {
            "source": data,
            "llm": llm if isinstance(llm, str) else None,
            "user_input": user_input,
            "payload": dict(payload or {}),
            "owner": owner or (scope.principal.name if scope is not None else acting().name),
        }
        keep = _record_start(history, run_id, stored, workflow_id, scope)
    if check_llms:
        _check_models_of_run(graph, run_id, history, on_event)
    with _active(scope, executor):
        return stream_run(
            graph, state, run_id, executor=executor, on_event=on_event, started=start, history=history,
            keep=keep,
        )  # fmt: skip


def _active(scope: CallScope | None, executor: Any) -> Any:
    """The run's scope made the one of the work running now, unless it is already (a request's own)."""
    active = current_scope()
    if scope is None or (active is not None and active.meter is scope.meter):
        return contextlib.nullcontext()
    return running(scope, executor)


def _record_start(
    history: Any, run_id: str, stored: dict[str, Any], workflow_id: Any, scope: CallScope | None
) -> Callable[[], dict[str, Any]] | None:
    """Record the run as started with its scope kept, or RunResumeError (409, `run_id`) when the id is
    already recorded; returns what gives the scope's record again (its budget's totals) when the run stops."""
    seal = seal_of(history)
    stored.update(kept(scope, seal))
    if not history.start_run(run_id, stored, workflow_id):  # one step: two runs never share an id
        raise RunResumeError(
            f"run_id {run_id!r} is already recorded in the run history (a run is never replaced): "
            "choose another run id, or leave it out to get a new one",
            status=409,
            field="run_id",
            run_id=run_id,
        )
    return functools.partial(kept, scope, seal) if scope is not None else None


def _check_models_of_run(graph: Any, run_id: str, history: Any, on_event: EventCallback | None) -> None:
    """`check_models`; a model that cannot be used fails the recorded run (`failed`, the reason kept)."""
    try:
        check_models(graph)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:2000]
        if history is not None:
            history.set_status(run_id, "failed", error)
        if on_event is not None:
            on_event({"type": "run.finished", "run_id": run_id, "status": "failed", "error": error})
        raise


def _owning_history(function: _F) -> _F:
    """`storage=` given as a folder or URL is opened for the call and closed after it; a history object
    given is the caller's and stays open."""

    @functools.wraps(function)
    def call(*args: Any, storage: Any, **kwargs: Any) -> Any:
        history = _open_history(storage)
        try:
            return function(*args, storage=history, **kwargs)
        finally:
            if history is not storage:
                history.close()

    return cast(_F, call)


def resume_workflow(
    graph: Any, run_id: str, decision: Any, *, executor: Any, on_event: EventCallback | None = None
) -> dict[str, Any]:
    """Resume a run that a HITL node paused, with the reviewer's decision (same graph, same run id).

    Args:
        decision: `"approve"`, `"reject"` or `{"decision": "approve"|"reject"|"edit", "edited_output",
            "comment"}`.
    """
    from langgraph.types import Command

    start = {"type": "run.resumed", "run_id": run_id, "decision": decision}
    return stream_run(
        graph, Command(resume=decision), run_id, executor=executor, on_event=on_event, started=start
    )


@_owning_history
def resume_run(
    run_id: str,
    decision: Any,
    *,
    storage: Any,
    registry: Any = None,
    executor: Any = None,
    llm: Any = None,
    on_event: EventCallback | None = None,
    principal: Any = None,
    principals: PrincipalLookup | None = None,
) -> dict[str, Any]:
    """Resume a run a HITL node paused, from any process: the run's stored source is compiled again with
    the same checkpointer and carried on with the reviewer's decision, under the run's own kept scope
    (its owner's ceiling, end user and the run's one budget, carried on from where it paused), never the
    decider's.

    Args:
        run_id: the id of a run recorded by `run_workflow(..., history=...)` and now `interrupted`.
        decision: `"approve"`, `"reject"`, or `{"decision": "approve"|"reject"|"edit", "edits": {...}}`
            (`edits` replaces the result; `edited_output` and `comment` as `resume_workflow` takes).
        storage: the folder holding `runs.sqlite`, a `postgresql://` URL, or a `RunHistory` /
            `PgRunHistory`.
        registry, executor: default a registry on the storage folder and an executor on it.
        llm: a model or spec for every agent; default the one the run started with.
        principal: who resumes (an `echo_tools.gate.Principal`); default the one acting now. Only the
            run's owner or an admin may.
        principals: the principals there are now, by name (a server's `Gatekeeper.principal_named`): the
            run goes on with the narrower of its kept ceiling and its owner's current one; a run whose
            owner is gone is not resumed.

    Raises:
        RunResumeError: the run is unknown (404), owned by another principal (409 `owner`), not paused
            (409 `status`), paused at nodes the workflow
            compiled again from its source does not have (409 `nodes`), its kept scope was changed or
            names a principal that is gone (409 `scope`), or the decision does not fit (422).
    """
    from langgraph.types import Command

    history = _open_history(storage)
    record = _recorded_run(history, run_id)
    stored = record["source"]
    seal = seal_of(history)
    scope = _run_scope(record, seal, principals)  # before the owner check: the owner is the sealed one
    check_owner(record["owner"], principal, run_id, "resume")
    resume_value = _checked_resume(history, record, decision, run_id)
    own_executor = executor is None
    if registry is None:
        registry = _storage_registry(history, run_id)
    if executor is None:
        from echo_tools.executor import ToolExecutor

        executor = ToolExecutor(registry)
    try:
        # compiled under the run's scope too: what the compile may store (a canvas's MCP server) is the owner's
        with _active(scope, executor):
            graph = _recompiled(history, stored, registry, executor, llm)
            _check_paused_nodes(graph, stored, run_id)
            start = {"type": "run.resumed", "run_id": run_id, "decision": resume_value}
            if not history.claim_run(run_id):  # one step: a second resume of the same pause loses here
                now = (history.run(run_id) or {}).get("status")
                raise RunResumeError(
                    f"run {run_id!r} is {now!r}, not 'interrupted': another resume took it first",
                    status=409,
                    field="status",
                    run_id=run_id,
                )
            # kept among the run's events, so a replay applies the same decisions
            history.record(ToolEvent(type="run.resumed", run_id=run_id, input=resume_value))
            keep = functools.partial(kept, scope, seal) if scope is not None else None
            return stream_run(
                graph, Command(resume=resume_value), run_id, executor=executor, on_event=on_event,
                started=start, history=history, keep=keep,
            )  # fmt: skip
    finally:
        if own_executor:
            executor.close()


def _run_scope(record: Mapping[str, Any], seal: Seal, principals: PrincipalLookup | None) -> CallScope | None:
    """The scope a paused run carries on under: the one its record kept, whose principal must be the
    recorded owner (RunResumeError 409 `scope` when either was changed, or the principal is gone). A run
    recorded before scopes were kept goes on under its owner's current grants when the server knows its
    principals, else (the CLI, in-process Python) under the scope acting now, as before."""
    run_id, stored = record["run_id"], record["source"]
    try:
        scope = restored(stored, seal, run_id, principals) if isinstance(stored, Mapping) else None
    except ScopeRestoreError as exc:
        raise RunResumeError(str(exc), status=409, field="scope", run_id=run_id) from exc
    if scope is not None:
        if scope.principal.name != record["owner"]:
            raise RunResumeError(
                f"run {run_id!r}: its recorded owner {record['owner']!r} is not the principal its sealed scope "
                f"names ({scope.principal.name!r}): the record was changed; it is not resumed",
                status=409, field="scope", run_id=run_id,
            )  # fmt: skip
        return scope
    if principals is not None:
        owner = principals(record["owner"])
        if owner is None:
            raise RunResumeError(
                f"run {run_id!r} was started by principal {record['owner']!r}, which no longer exists; it is "
                "not resumed", status=409, field="scope", run_id=run_id,
            )  # fmt: skip
        return CallScope.admit(owner, run_id=run_id)
    return current_scope()


def check_owner(owner: str, principal: Any, run_id: str, doing: str) -> None:
    """RunResumeError (409, `owner`) unless `principal` (default: the one acting now) owns run `run_id`
    (started it) or is an admin."""
    principal = principal if principal is not None else acting()
    if principal.owns(owner):
        return
    raise RunResumeError(
        f"run {run_id!r} is owned by {owner!r}; principal {principal.name!r} may not {doing} it (only its "
        "owner or an admin may)",
        status=409,
        field="owner",
        run_id=run_id,
    )


def _checked_resume(history: Any, record: Mapping[str, Any], decision: Any, run_id: str) -> dict[str, Any]:
    """The decision as the paused node takes it, once the run is known to be paused (409 otherwise)."""
    if record["status"] != "interrupted":
        raise RunResumeError(
            f"run {run_id!r} is {record['status']!r}, not 'interrupted': only a run paused at a HITL node "
            "can be resumed",
            status=409,
            field="status",
            run_id=run_id,
        )
    paused = run_status(run_id, storage=history)["state"]
    asking = elicitation(paused)
    if asking is not None:  # an MCP server asked the person something: the answer goes back to it
        return check_answer(decision, asking, run_id)
    value = check_decision(decision, run_id)
    check_allowed(value["decision"], paused, run_id)
    return value


def _recompiled(history: Any, stored: Any, registry: Any, executor: Any, llm: Any) -> Any:
    """The run's recorded source compiled again on the history's checkpointer."""
    source = stored.get("source", stored) if isinstance(stored, Mapping) else stored
    if llm is None and isinstance(stored, Mapping):
        llm = stored.get("llm")
    payload = stored.get("payload") if isinstance(stored, Mapping) else None
    graph, _ = compile_source(
        source,
        registry,
        executor,
        llm=llm,
        checkpointer=history.checkpointer(),
        state_keys=list(payload or {}),
    )
    return graph


def _check_paused_nodes(graph: Any, stored: Any, run_id: str) -> None:
    """RunResumeError (409, `nodes`) when the checkpoint waits at nodes the recompiled graph lacks: carrying
    on would run nothing and report `completed` for a run whose remaining nodes never ran."""
    recorded = stored.get("paused_at") if isinstance(stored, Mapping) else None
    waiting = [str(n) for n in recorded or ()]
    if not waiting:  # a run recorded before `paused_at` was kept: what the new graph finds waiting
        waiting = list(graph.get_state({"configurable": {"thread_id": run_id}}).next)
        if not waiting:
            raise RunResumeError(
                f"run {run_id!r} cannot be resumed: its checkpoint waits at no node of the workflow compiled "
                "again from its recorded source (the workflow's node ids changed since it paused)",
                status=409,
                field="nodes",
                run_id=run_id,
            )
    missing = [n for n in waiting if n not in graph.nodes]
    if missing:
        raise RunResumeError(
            f"run {run_id!r} cannot be resumed: it is paused at node(s) {', '.join(missing)}, and the "
            "workflow compiled again from its recorded source has no node of that id (its node ids "
            "changed since it paused); start a new run",
            status=409,
            field="nodes",
            run_id=run_id,
        )


@_owning_history
def replay_run(
    run_id: str,
    *,
    storage: Any,
    new_run_id: str | None = None,
    registry: Any = None,
    executor: Any = None,
    llm: Any = None,
    on_event: EventCallback | None = None,
) -> dict[str, Any]:
    """Run a recorded run's workflow again under `new_run_id`, answering each tool call from the recorded
    events in order (no tool runs; the events carry `metadata.replayed: true`) and applying the recorded
    HITL decisions; returns the final state.

    Raises:
        RunResumeError: no run has this id (404).
        ReplayMismatchError: the calls no longer match the recording (names the first call that differs).
    """
    from langgraph.types import Command

    from echo_tools.executor import ToolExecutor

    history = _open_history(storage)
    record = _recorded_run(history, run_id)
    recording = history.recording(run_id)
    decisions = list(recording.decisions)
    stored = record["source"]
    if registry is None:
        registry = executor.registry if executor is not None else _storage_registry(history, run_id)
    # answers every call from the recording; of a given executor only its egress policy is used
    egress = executor.egress if executor is not None else None
    replayer = ToolExecutor(registry, egress=egress, replay=recording)
    new_run_id = new_run_id or f"run_{uuid.uuid4().hex}"
    try:
        data = load_source(stored.get("source") or {})
        graph, mapped = compile_source(
            data,
            registry,
            replayer,
            llm=llm or stored.get("llm"),
            state_keys=list(stored.get("payload") or {}),
        )
        workflow_id = record.get("workflow_id") or mapped.workflow.get("workflow_id")
        state = initial_state(
            stored.get("user_input"), workflow_id, new_run_id, **dict(stored.get("payload") or {})
        )
        start = {"type": "run.started", "run_id": new_run_id, "workflow_id": workflow_id, "replay_of": run_id}
        final = stream_run(graph, state, new_run_id, executor=replayer, on_event=on_event, started=start)
        while final.get("__interrupt__") and decisions:
            decision = decisions.pop(0)
            start = {"type": "run.resumed", "run_id": new_run_id, "decision": decision, "replayed": True}
            final = stream_run(
                graph,
                Command(resume=decision),
                new_run_id,
                executor=replayer,
                on_event=on_event,
                started=start,
            )
    finally:
        replayer.close()
    recording.check()
    return final


def _recorded_run(history: Any, run_id: str) -> dict[str, Any]:
    """The history's record of `run_id`, or `RunResumeError` (404) naming it."""
    record = history.run(run_id)
    if record is None:
        raise RunResumeError(
            f"no recorded run has run_id {run_id!r}", status=404, field="run_id", run_id=run_id
        )
    return record


@_owning_history
def run_status(run_id: str, *, storage: Any) -> dict[str, Any]:
    """`{"run_id", "status", "state", "error", "failed_calls", "owner"}` of a recorded run: its status (one of
    `RUN_STATUSES`), its last checkpointed state, the error it stopped on or the summary of its failed
    calls, and the failed tool calls listed (`completed_with_errors`).

    Raises:
        RunResumeError: no run has this id (404).
    """
    history = _open_history(storage)
    record = _recorded_run(history, run_id)
    _run_scope(record, seal_of(history), None)  # a record whose owner was changed is not read either
    saver = history.checkpointer()
    checkpoint = saver.get_tuple({"configurable": {"thread_id": run_id}})
    values = dict(checkpoint.checkpoint.get("channel_values") or {}) if checkpoint else {}
    pending = [w for w in (checkpoint.pending_writes or []) if w[1] == "__interrupt__"] if checkpoint else []
    if pending:
        values["__interrupt__"] = [getattr(i, "value", i) for w in pending for i in _as_list(w[2])]
    stored = record["source"] if isinstance(record["source"], Mapping) else {}
    return {
        "run_id": run_id,
        "status": record["status"],
        "state": values,
        "error": record.get("error"),
        "failed_calls": list(stored.get("failed_calls") or []),
        "owner": record["owner"],
        # what a paused run waits for: a tool approval (tool, args, agent, approval id), a HITL node, a question
        "waiting_for": waiting_for(values, run_id) if record["status"] == "interrupted" else [],
    }


@_owning_history
def cancel_run(run_id: str, *, storage: Any) -> dict[str, Any]:
    """Cancel a run paused at a HITL node (it will not be resumed): its status becomes `cancelled`.

    Raises:
        RunResumeError: no run has this id (404), or it is not `interrupted` (409 naming its status).
    """
    history = _open_history(storage)
    record = _recorded_run(history, run_id)
    if not history.claim_run(run_id, "interrupted", "cancelled"):
        now = (history.run(run_id) or record).get("status")
        raise RunResumeError(
            f"run {run_id!r} is {now!r}, not 'interrupted': only a paused run can be cancelled",
            status=409,
            field="status",
            run_id=run_id,
        )
    return run_status(run_id, storage=history)


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _open_history(storage: Any) -> Any:
    if isinstance(storage, str) and storage.startswith(("postgresql://", "postgres://")):
        from echo_tools.pg.history import PgRunHistory

        return PgRunHistory(storage)
    if isinstance(storage, (str, Path)):
        from echo_tools.history import RunHistory

        return RunHistory(storage)
    return storage


def _storage_registry(history: Any, run_id: str) -> Any:
    # the catalogue beside an embedded history; a PostgreSQL history needs the caller's registry
    path = getattr(history, "path", None)
    if path is None:
        raise ValueError(f"run {run_id!r}: pass registry= (the run history has no storage folder)")
    from echo_tools.registry import ToolRegistry

    return ToolRegistry(storage_dir=Path(path).parent)
