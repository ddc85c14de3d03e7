"""Running a workflow from a canvas, a workflow + agents pair, or a JSON file: the API the CLI calls.

`compile_source` turns any accepted source into a compiled graph (canvas payloads go through NodeMapper;
its errors are raised with the diagnostics listed). `run_workflow` runs it as EchoAI's runtime does and
reports progress to `on_event` as it happens: node start and finish (LangGraph's custom stream), every
tool event of the run (an executor sink), a rehearsal notice when no LLM is configured, and the end.
With a `RunHistory` the run is recorded (source, status, tool events) and checkpointed in SQLite, so
`resume_run` can carry on a paused run from any process.
"""

from __future__ import annotations

import functools
import json
import logging
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from echo_tools.events import ToolEvent
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.llm import check_llm, describe_llm
from workflow_bridge.llm_rehearsal import REHEARSAL_NOTICE
from workflow_bridge.node_mapper import MappedWorkflow, NodeMapper
from workflow_bridge.state import initial_state

logger = logging.getLogger("workflow_bridge.runner")

_F = TypeVar("_F", bound=Callable[..., Any])
HITL_DECISIONS = ("approve", "reject", "edit")
EventCallback = Callable[[dict[str, Any]], Any]
_REHEARSAL: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_MODELS: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


class RunResumeError(ValueError):
    """A run that cannot be resumed: `status` is the HTTP status the API answers (404 unknown run, 409 not
    paused, 422 a decision that does not fit the HITL node), `field` what the message names."""

    def __init__(self, message: str, *, status: int, field: str, run_id: str) -> None:
        super().__init__(message)
        self.status = status
        self.field = field
        self.run_id = run_id


class WorkflowSourceError(ValueError):
    """A workflow source that cannot be compiled; `diagnostics` lists NodeMapper's findings."""

    def __init__(self, message: str, diagnostics: list[Any] | None = None) -> None:
        super().__init__(message)
        self.diagnostics = list(diagnostics or [])


def load_source(source: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """The source as a JSON object: a dict as given, or the contents of a JSON file."""
    if isinstance(source, Mapping):
        return dict(source)
    path = Path(source)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorkflowSourceError(
            f"workflow file {str(path)!r} cannot be read: {exc.strerror or exc}"
        ) from exc
    except json.JSONDecodeError as exc:
        raise WorkflowSourceError(
            f"workflow file {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}"
        ) from exc
    if not isinstance(data, dict):
        raise WorkflowSourceError(
            f"workflow file {str(path)!r} must hold a JSON object, got {type(data).__name__}"
        )
    return data


def map_source(data: Mapping[str, Any], registry: Any) -> MappedWorkflow:
    """A `MappedWorkflow` for a canvas payload / export (through NodeMapper) or a `{workflow, agents}` pair.

    Raises:
        WorkflowSourceError: the shape is not recognised, or NodeMapper reported errors (listed).
    """
    if isinstance(data.get("workflow"), Mapping) and "agents" in data:
        agents = data["agents"]
        if isinstance(agents, list):
            agents = {str(a.get("agent_id")): a for a in agents if isinstance(a, Mapping)}
        if not isinstance(agents, Mapping):
            raise WorkflowSourceError(f"'agents' must map agent ids to agents, got {type(agents).__name__}")
        return MappedWorkflow(workflow=dict(data["workflow"]), agents=dict(agents))
    if "canvas_nodes" in data or "nodes" in data:
        mapped = NodeMapper(registry).map_canvas(data)
        if not mapped.ok:
            lines = [f"  {d.level} {d.node_id or '-'}.{d.field or '-'}: {d.message}" for d in mapped.errors]
            raise WorkflowSourceError(
                f"the canvas has {len(lines)} error(s):\n" + "\n".join(lines), mapped.diagnostics
            )
        return mapped
    if "connections" in data and "agents" in data:
        raise WorkflowSourceError(
            'this is a workflow JSON without its agent JSONs; give {"workflow": ..., "agents": {...}}'
        )
    raise WorkflowSourceError(
        "unrecognised workflow source: expected a canvas payload (canvas_nodes), a canvas export (nodes), "
        f'or {{"workflow", "agents"}}; got keys {sorted(data)[:10]}'
    )


def compile_source(
    source: Mapping[str, Any] | str | Path, registry: Any, executor: Any, **options: Any
) -> tuple[Any, MappedWorkflow]:
    """Compile any accepted source; returns (compiled graph, mapped workflow).

    `options` go to `WorkflowCompiler` (`llm`, `missing_agents`, `checkpointer`, `state_keys`). Give the
    run's payload keys as `state_keys`: LangGraph would otherwise drop them before any node reads them.

    Raises:
        WorkflowSourceError: unreadable or unrecognised source, or canvas errors (listed).
        WorkflowCompileError / ToolNotFoundError: the workflow cannot become a graph.
    """
    mapped = map_source(load_source(source), registry)
    compiler = WorkflowCompiler(registry, executor, **options)
    graph = compiler.compile(mapped.workflow, mapped.agents)
    _REHEARSAL[graph] = compiler.uses_rehearsal
    _MODELS[graph] = compiler.models
    return graph, mapped


def uses_rehearsal(graph: Any) -> bool:
    """True when a graph from `compile_source` runs some agent on the offline rehearsal model."""
    return _REHEARSAL.get(graph, False)


def models_of(graph: Any) -> dict[str, Any]:
    """The model of each agent of a graph from `compile_source` (agent id -> CrewAI LLM)."""
    return dict(_MODELS.get(graph) or {})


def check_models(graph: Any) -> None:
    """Check every distinct model of a graph from `compile_source` before running it (`llm.check_llm`).

    Raises:
        LLMConfigError: a model's server does not answer or its API key is not set, in one sentence.
    """
    seen: set[str] = set()
    for llm in models_of(graph).values():
        label = describe_llm(llm)
        if label not in seen:
            seen.add(label)
            check_llm(llm)


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
            with `history.checkpointer()`, and the run, its tool events and its final status (`interrupted`,
            `completed`, `failed`) are recorded, so `resume_run` can carry it on from another process.

    Raises:
        LLMConfigError: `check_llms`, and a model cannot be used.
    """
    data = load_source(source)
    graph, mapped = compile_source(
        data,
        registry,
        executor,
        llm=llm,
        missing_agents=missing_agents,
        checkpointer=history.checkpointer() if history is not None else None,
        state_keys=list(payload or {}),
    )
    if check_llms:
        check_models(graph)
    if user_input is None and not payload:
        # sample canvases carry a ready request, so `echo-tools run FILE` works without --input
        user_input = _default_input(data) or _default_input(mapped.workflow)
    run_id = run_id or f"run_{uuid.uuid4().hex}"
    workflow_id = mapped.workflow.get("workflow_id")
    state = initial_state(user_input, workflow_id, run_id, **dict(payload or {}))
    start = {
        "type": "run.started",
        "run_id": run_id,
        "workflow_id": workflow_id,
        "name": mapped.workflow.get("name"),
        "models": sorted({describe_llm(m) for m in models_of(graph).values()}),
    }
    if history is not None:
        stored = {
            "source": data,
            "llm": llm if isinstance(llm, str) else None,
            "user_input": user_input,
            "payload": dict(payload or {}),
        }
        history.start_run(run_id, stored, workflow_id)
    return stream_run(
        graph, state, run_id, executor=executor, on_event=on_event, started=start, history=history
    )


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
) -> dict[str, Any]:
    """Resume a run a HITL node paused, from any process: the run's stored source is compiled again with
    the same checkpointer and carried on with the reviewer's decision.

    Args:
        run_id: the id of a run recorded by `run_workflow(..., history=...)` and now `interrupted`.
        decision: `"approve"`, `"reject"`, or `{"decision": "approve"|"reject"|"edit", "edits": {...}}`
            (`edits` replaces the result; `edited_output` and `comment` as `resume_workflow` takes).
        storage: the folder holding `runs.sqlite`, a `postgresql://` URL, or a `RunHistory` /
            `PgRunHistory`.
        registry, executor: default a registry on the storage folder and an executor on it.
        llm: a model or spec for every agent; default the one the run started with.

    Raises:
        RunResumeError: the run is unknown (404), not paused (409), or the decision does not fit (422).
    """
    from langgraph.types import Command

    history = _open_history(storage)
    record = _recorded_run(history, run_id)
    if record["status"] != "interrupted":
        raise RunResumeError(
            f"run {run_id!r} is {record['status']!r}, not 'interrupted': only a run paused at a HITL node "
            "can be resumed",
            status=409,
            field="status",
            run_id=run_id,
        )
    paused = run_status(run_id, storage=history)["state"]
    asking = _elicitation(paused)
    if asking is not None:  # an MCP server asked the person something: the answer goes back to it
        resume_value = check_answer(decision, asking, run_id)
    else:
        resume_value = check_decision(decision, run_id)
        _check_allowed(resume_value["decision"], paused, run_id)
    stored = record["source"]
    source = stored.get("source", stored) if isinstance(stored, Mapping) else stored
    own_executor = executor is None
    if registry is None:
        registry = _storage_registry(history, run_id)
    if executor is None:
        from echo_tools.executor import ToolExecutor

        executor = ToolExecutor(registry)
    if llm is None and isinstance(stored, Mapping):
        llm = stored.get("llm")
    try:
        payload = stored.get("payload") if isinstance(stored, Mapping) else None
        graph, _ = compile_source(
            source,
            registry,
            executor,
            llm=llm,
            checkpointer=history.checkpointer(),
            state_keys=list(payload or {}),
        )
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
        return stream_run(
            graph,
            Command(resume=resume_value),
            run_id,
            executor=executor,
            on_event=on_event,
            started=start,
            history=history,
        )
    finally:
        if own_executor:
            executor.close()


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
        workflow_id = mapped.workflow.get("workflow_id")
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


def check_decision(decision: Any, run_id: str = "") -> dict[str, Any]:
    """A reviewer's decision in the form the HITL node takes, or `RunResumeError` (422) naming the field.

    `"approve"` / `"reject"` / `"edit"`, or `{"decision": ..., "edits": {...}, "comment": text}`; `edits`
    (an object) is what an `edit` puts in place of the paused node's `crew_result`.
    """
    if isinstance(decision, str):
        decision = {"decision": decision}
    if not isinstance(decision, Mapping):
        raise _unfit(
            f"decision must be 'approve', 'reject' or 'edit', got {decision!r:.80}",
            "decision",
            run_id,
        )
    kind = decision.get("decision")
    if kind not in ("approve", "reject", "edit"):
        raise _unfit(
            f"decision must be 'approve', 'reject' or 'edit', got {kind!r:.80}",
            "decision",
            run_id,
        )
    value = {k: v for k, v in decision.items() if k != "edits"}
    edits = decision.get("edits")
    if kind == "edit":
        if not isinstance(edits, Mapping):
            raise _unfit(
                f"edits must be an object for an 'edit' decision, got {edits!r:.80}",
                "edits",
                run_id,
            )
        # `crew_result` in the edits replaces the paused result as it is; other edits replace it whole
        value.setdefault("edited_output", edits["crew_result"] if "crew_result" in edits else dict(edits))
    elif edits is not None:
        raise _unfit(
            f"edits are only taken with an 'edit' decision, not with {kind!r}",
            "edits",
            run_id,
        )
    comment = value.get("comment")
    if comment is not None and not isinstance(comment, str):
        raise _unfit(f"comment must be a string, got {comment!r:.80}", "comment", run_id)
    return value


def _unfit(message: str, field: str, run_id: str) -> RunResumeError:
    # a decision that does not fit the paused HITL node: the API answers 422
    return RunResumeError(message, status=422, field=field, run_id=run_id)


def _recorded_run(history: Any, run_id: str) -> dict[str, Any]:
    """The history's record of `run_id`, or `RunResumeError` (404) naming it."""
    record = history.run(run_id)
    if record is None:
        raise RunResumeError(
            f"no recorded run has run_id {run_id!r}", status=404, field="run_id", run_id=run_id
        )
    return record


ELICITATION_ACTIONS = ("accept", "decline", "cancel")


def _elicitation(state: Mapping[str, Any]) -> dict[str, Any] | None:
    """The MCP elicitation request a run is paused at (the interrupt of `echo_tools.mcp.callbacks`), if any."""
    for request in state.get("__interrupt__") or []:
        if isinstance(request, Mapping) and request.get("type") == "mcp_elicitation":
            return dict(request)
    return None


def check_answer(answer: Any, request: Mapping[str, Any], run_id: str = "") -> dict[str, Any]:
    """A person's answer to an MCP server's elicitation request, or `RunResumeError` (422) naming the field.

    `{"decision": "accept", "content": {...}}` (also `"action"` for `"decision"`), `"decline"` or
    `"cancel"`; the server's schema checks `content` when the answer reaches it.
    """
    server = request.get("server")
    if isinstance(answer, str):
        answer = {"decision": answer}
    if not isinstance(answer, Mapping):
        raise _unfit(
            f"run {run_id!r} is paused at MCP server {server!r}'s question; the answer must be an object "
            f"with 'decision', got {answer!r:.80}",
            "decision",
            run_id,
        )
    action = answer.get("decision", answer.get("action"))
    if action not in ELICITATION_ACTIONS:
        raise _unfit(
            f"run {run_id!r} is paused at MCP server {server!r}'s question; decision must be "
            f"{', '.join(map(repr, ELICITATION_ACTIONS))}, got {action!r:.80}",
            "decision",
            run_id,
        )
    content = answer.get("content")
    if action == "accept" and not isinstance(content, Mapping):
        raise _unfit(
            f"content must be an object answering MCP server {server!r}'s question, got {content!r:.80}",
            "content",
            run_id,
        )
    answered = dict(content) if action == "accept" and isinstance(content, Mapping) else None
    return {"decision": action, "action": action, "content": answered}


def _check_allowed(kind: str, state: Mapping[str, Any], run_id: str) -> None:
    # the paused node says which decisions it takes (the canvas's allowedDecisions, allowEdit)
    for request in state.get("__interrupt__") or []:
        if not isinstance(request, Mapping):
            continue
        # a canvas may label its own decisions ("publish", "revise"): only the ones the node knows count
        allowed = [d for d in request.get("decisions") or () if d in HITL_DECISIONS] or list(HITL_DECISIONS)
        if kind == "edit" and request.get("allow_edit") is False:
            allowed = [d for d in allowed if d != "edit"]
        if kind not in allowed:
            raise _unfit(
                f"decision {kind!r} is not one the HITL node {request.get('node_id')!r} of run {run_id!r} "
                f"takes; it takes {', '.join(allowed)}",
                "decision",
                run_id,
            )


@_owning_history
def run_status(run_id: str, *, storage: Any) -> dict[str, Any]:
    """`{"run_id", "status", "state"}` of a recorded run: its status and its last checkpointed state.

    Raises:
        RunResumeError: no run has this id (404).
    """
    history = _open_history(storage)
    record = _recorded_run(history, run_id)
    saver = history.checkpointer()
    checkpoint = saver.get_tuple({"configurable": {"thread_id": run_id}})
    values = dict(checkpoint.checkpoint.get("channel_values") or {}) if checkpoint else {}
    pending = [w for w in (checkpoint.pending_writes or []) if w[1] == "__interrupt__"] if checkpoint else []
    if pending:
        values["__interrupt__"] = [getattr(i, "value", i) for w in pending for i in _as_list(w[2])]
    return {"run_id": run_id, "status": record["status"], "state": values}


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


def stream_run(
    graph: Any,
    graph_input: Any,
    run_id: str,
    *,
    executor: Any,
    on_event: EventCallback | None = None,
    started: dict[str, Any] | None = None,
    history: Any = None,
) -> dict[str, Any]:
    """Run a compiled graph on thread `run_id`, reporting progress to `on_event`; returns the final state.

    With `history` (a `RunHistory`), the run's tool events are kept there and its status set at the end:
    `interrupted`, `failed` (a tool call failed, or the run stopped on an error) or `completed`.
    """
    emit = _safe(on_event)
    emit(started or {"type": "run.started", "run_id": run_id})
    if uses_rehearsal(graph):
        logger.warning(REHEARSAL_NOTICE)
        emit({"type": "llm.rehearsal", "run_id": run_id, "message": REHEARSAL_NOTICE})
    config = {"configurable": {"thread_id": run_id}}

    nested = f"{run_id}/"  # sub-runs of `workflow` / `agent` tools called in this run (composite.py)

    failures: list[str] = []

    def forward(event: Any) -> None:
        if event.run_id == run_id or (event.run_id or "").startswith(nested):
            if history is not None:
                history.record(event)
            if event.type in ("tool.failed", "tool.timeout"):
                failures.append(str(event.tool_id))
            emit(event.to_dict())  # `agent_name` comes from the calling agent's context

    executor.add_sink(forward)
    interrupts: list[Any] = []
    try:
        for mode, chunk in graph.stream(graph_input, config, stream_mode=["updates", "custom"]):
            if mode == "custom" and isinstance(chunk, dict):
                emit({**chunk, "run_id": run_id})
            elif mode == "updates" and isinstance(chunk, dict) and "__interrupt__" in chunk:
                interrupts.extend(chunk["__interrupt__"])
                values = [getattr(i, "value", i) for i in chunk["__interrupt__"]]
                emit({"type": "run.interrupted", "run_id": run_id, "interrupts": values})
    except BaseException as exc:
        if history is not None:
            history.set_status(run_id, "failed", f"{type(exc).__name__}: {exc}"[:2000])
        raise
    finally:
        executor.remove_sink(forward)
    final = dict(graph.get_state(config).values)
    if interrupts:
        final["__interrupt__"] = interrupts
    status = "interrupted" if interrupts else "completed"
    if history is not None:
        failed = not interrupts and failures
        error = f"failed tool calls: {', '.join(failures)}" if failed else None
        history.set_status(run_id, "failed" if failed else status, error)
    emit({"type": "run.finished", "run_id": run_id, "status": status})
    return final


def _default_input(data: Mapping[str, Any]) -> str | None:
    meta = data.get("metadata")
    value = meta.get("default_input") if isinstance(meta, Mapping) else None
    return value if isinstance(value, str) and value else None


def _safe(on_event: EventCallback | None) -> EventCallback:
    def emit(event: dict[str, Any]) -> None:
        if on_event is None:
            return
        try:
            on_event(event)
        except Exception:  # boundary: a broken progress callback must not break the run
            logger.exception("on_event callback raised on %s", event.get("type"))

    return emit
