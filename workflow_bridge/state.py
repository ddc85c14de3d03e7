"""The workflow state contract: EchoAI's TypedDict, with every key the nodes read or write declared.

EchoAI built the state class from the agents' input/output keys and the workflow's `state_schema`; LangGraph
silently drops undeclared keys, so `run_id`, `workflow_id` and the routing keys never reached a node. Here
they are declared, `messages` and `tool_events` append, and keys that parallel branches write in the same
step use reducers that accept concurrent writes.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, TypedDict

# The keys EchoAI's runtime reads from an input payload to find the user's request, in its order (§2.10).
USER_INPUT_KEYS = ("user_input", "message", "question", "input", "task_description", "prompt")
_NOT_REQUEST_KEYS = {"workflow_id", "run_id", "mode", "version", "context"}

# Keys every workflow has, besides the agents' and the workflow's own.
BASE_KEYS = (
    "user_input",
    "original_user_input",
    "task_description",
    "crew_result",
    "parallel_output",
    "individual_outputs",
    "hierarchical_output",
    "messages",
    "run_id",
    "workflow_id",
    "tool_events",
    "result",
    "message",
    "question",
    "input",
    "prompt",
    "context",
    "expected_output",
    "_conditional_route",
    "_conditional_node",
    "_routes",
    "hitl_decision",
    "_loops",
    "_maps",
    "_map_results",
    "_map_item",
    "_reviews",
    "review_feedback",
    "review_score",
)
# keys whose writes merge into what is there (branch results, the progress of each Loop, Map, Self-Review)
MERGED_KEYS = frozenset({"parallel_output", "individual_outputs", "_routes", "_loops", "_maps", "_reviews"})


def last_value(old: Any, new: Any) -> Any:
    """Reducer: the newest write wins, and several writes in one step are allowed (parallel branches)."""
    return new


def merge_dicts(old: Any, new: Any) -> Any:
    """Reducer for `parallel_output` / `individual_outputs`: branch results merge; a non-dict replaces."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {**old, **new}
    return new


def merge_nested(old: Any, new: Any) -> Any:
    """Reducer for `_map_results` (Map node -> item index -> result): the items of a wave, written by
    parallel tasks, merge; a Map starting over writes None for its node, which clears what it had."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    out = dict(old)
    for key, value in new.items():
        inner = out.get(key)
        out[key] = {**inner, **value} if isinstance(inner, dict) and isinstance(value, dict) else value
    return out


def append_list(old: Any, new: Any) -> list[Any]:
    """Reducer for `messages` / `tool_events`: `operator.add` that tolerates a missing side."""
    return operator.add(list(old or []), list(new or []))


def state_keys(
    workflow: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]], extra_keys: Iterable[str] = ()
) -> list[str]:
    """Every key of the workflow's state: EchoAI's base keys, agent input/output keys, `state_schema`, and
    `extra_keys` (the compiler's: the variables Conditional branches read and the run's payload keys)."""
    keys: dict[str, None] = dict.fromkeys(BASE_KEYS)
    for agent in agents.values():
        for field in ("input_schema", "output_schema"):
            for key in _key_names(agent.get(field)):
                keys[key] = None
    for key in _key_names(workflow.get("state_schema")):
        keys[key] = None
    for key in _key_names(list(extra_keys)):
        keys[key] = None
    return list(keys)


def _key_names(value: Any) -> Iterable[str]:
    # EchoAI stores state keys as a list of names; a JSON-Schema-shaped dict also appears in docs and tests.
    names: list[Any]
    if isinstance(value, Mapping):
        props = value.get("properties")
        names = list(props.keys() if isinstance(props, Mapping) else value.keys())
    elif isinstance(value, (list, tuple)):
        names = [v.get("name") if isinstance(v, Mapping) else v for v in value]
    else:
        return []
    return [n for n in names if isinstance(n, str) and n.isidentifier()]


def build_state_schema(
    workflow: Mapping[str, Any],
    agents: Mapping[str, Mapping[str, Any]],
    name: str = "WorkflowState",
    extra_keys: Iterable[str] = (),
) -> type:
    """The `TypedDict` state class for `workflow` (EchoAI's `_create_state_class`, every key declared).

    `messages` and `tool_events` append; `parallel_output`, `individual_outputs` and the routing and progress
    keys merge dicts (`_map_results` two levels deep); every other
    key keeps the last value written, accepting several writes in one step. `extra_keys` are declared too
    (LangGraph drops input keys the class does not declare).
    """
    fields: dict[str, Any] = {}
    for key in state_keys(workflow, agents, extra_keys):
        if key in ("messages", "tool_events"):
            fields[key] = Annotated[list, append_list]
        elif key in MERGED_KEYS:
            fields[key] = Annotated[Any, merge_dicts]
        elif key == "_map_results":
            fields[key] = Annotated[Any, merge_nested]
        else:
            fields[key] = Annotated[Any, last_value]
    return TypedDict(name, fields, total=False)  # type: ignore[operator]


def user_request(payload: Mapping[str, Any]) -> str:
    """The user's request in an input payload, found as EchoAI's runtime finds it (§2.10 step 5)."""
    for key in USER_INPUT_KEYS:
        value = payload.get(key)
        if value:
            return value if isinstance(value, str) else json.dumps(value, default=str)
    rest = {k: v for k, v in payload.items() if k not in _NOT_REQUEST_KEYS}
    return json.dumps(rest, default=str) if rest else ""


def initial_state(
    user_input: str | None = None,
    workflow_id: str | None = None,
    run_id: str | None = None,
    /,
    **payload: Any,
) -> dict[str, Any]:
    """The initial state EchoAI's runtime builds: the payload, the request under three keys, ids, no messages.

    EchoAI calls `initial_state(user_input, workflow_id, run_id, **input_payload)`, and its payloads may
    hold `workflow_id` and `run_id` as metadata; the three leading arguments are positional-only so those
    keys land in `payload`. An id given as an argument wins; otherwise the payload's is used.
    """
    request = user_input if user_input is not None else user_request(payload)
    return {
        **payload,
        "user_input": request,
        "original_user_input": request,
        "task_description": request,
        "messages": [],
        "tool_events": [],
        "workflow_id": workflow_id if workflow_id is not None else payload.get("workflow_id"),
        "run_id": run_id if run_id is not None else payload.get("run_id"),
    }
