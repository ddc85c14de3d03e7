"""The config of the canvas nodes that shape a run (Loop, Map, Failsafe, Self-Review), read and checked once
at compile time: a value that cannot work is a `NodeConfigError` naming the node (its canvas label and
id), the field and the value, with a hint, never a surprise mid-run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

LOOP_TYPES = {
    "for-each": "for-each",
    "foreach": "for-each",
    "for_each": "for-each",
    "each": "for-each",
    "for": "for",
    "count": "for",
    "repeat": "for",
    "times": "for",
    "while": "while",
    "until": "until",
    "do-until": "until",
    "do_until": "until",
}
MAP_OPERATIONS = {"": "map", "map": "map", "transform": "map", "each": "map", "for-each": "map"}
MAP_OPERATIONS.update({"filter": "filter"})
MAX_LOOP_ITERATIONS = 10_000
MAX_MAP_CONCURRENCY = 64  # the default Budget's max_fanout: more would be refused call by call
MAX_MAP_ITEMS = 10_000
MAX_RETRY_ATTEMPTS = 10
LIST_TYPES = frozenset({"array", "list", "json", "any"})


class NodeConfigError(ValueError):
    """A node's config that cannot run; `node_id` and `field` say where, `unknown` names the variables it
    reads that the run does not have (when that is the problem)."""

    def __init__(self, message: str, node_id: str, field: str, unknown: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.node_id = node_id
        self.field = field
        self.unknown = unknown


def declared_types(workflow: Mapping[str, Any], agents: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """Variable name -> declared type, from the workflow's `state_schema` and the nodes' variables."""
    declared: dict[str, str] = {}
    schema = workflow.get("state_schema")
    if isinstance(schema, Mapping):
        declared.update({str(k): str(v) for k, v in schema.items() if isinstance(v, str)})
    for agent in agents.values():
        meta = agent.get("metadata") or {}
        for var in [*(meta.get("input_variables") or []), *(meta.get("output_variables") or [])]:
            if isinstance(var, Mapping) and var.get("name") and var.get("type"):
                declared.setdefault(str(var["name"]), str(var["type"]))
    return declared


def node_label(agent: Mapping[str, Any]) -> str:
    """How a message names a node: its type, canvas name, canvas id and agent id."""
    meta = agent.get("metadata") or {}
    kind = meta.get("node_type") or "Agent"
    canvas_id = meta.get("canvas_node_id")
    where = f"canvas id {canvas_id}, " if canvas_id is not None else ""
    return f"{kind} node {agent.get('name')!r} ({where}id {agent.get('agent_id')})"


def _fail(agent: Mapping[str, Any], field: str, problem: str) -> NodeConfigError:
    return NodeConfigError(f"{node_label(agent)}: {field}: {problem}", str(agent.get("agent_id")), field)


def _block(agent: Mapping[str, Any], key: str) -> dict[str, Any]:
    block = (agent.get("metadata") or {}).get(key)
    return dict(block) if isinstance(block, Mapping) else {}


def _positive_int(
    agent: Mapping[str, Any], field: str, value: Any, limit: int, hint: str, *, zero: bool = False
) -> int:
    floor = 0 if zero else 1
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _fail(agent, field, f"{value!r} is not a number; {hint}")
    try:
        number = float(value)
    except ValueError:
        raise _fail(agent, field, f"{value!r} is not a number; {hint}") from None
    if not number.is_integer() or not floor <= number <= limit:
        raise _fail(agent, field, f"{value!r} must be a whole number from {floor} to {limit}; {hint}")
    return int(number)


def _variable(agent: Mapping[str, Any], field: str, value: Any, declared: Mapping[str, str]) -> str | None:
    """A state variable a node reads a list from (None: the previous node's output); a declared type that
    is not a list is an error."""
    if value in (None, ""):
        return None
    if not isinstance(value, str) or not value.strip().isidentifier():
        raise _fail(agent, field, f"{value!r} is not a variable name (letters, digits and '_')")
    name = value.strip()
    kind = str(declared.get(name) or "").lower()
    if kind and kind not in LIST_TYPES:
        raise _fail(
            agent,
            field,
            f"variable {name!r} is declared as {kind!r}, not a list; declare it with type 'array' "
            "(or point the node at a variable that holds a list)",
        )
    return name


@dataclass(frozen=True)
class LoopConfig:
    """A Loop node: `kind` is for-each, for (a count), while or until."""

    kind: str
    max_iterations: int
    array: str | None
    item: str
    condition: str
    count: int | None


def loop_config(agent: Mapping[str, Any], declared: Mapping[str, str]) -> LoopConfig:
    """The Loop node's config, checked (see the module docstring).

    Raises:
        NodeConfigError: no bound, an unknown loop type, a list variable declared as something else, a
            while without a condition that parses.
    """
    from workflow_bridge.conditions import ConditionError, parse_condition

    block = _block(agent, "loop_config")
    raw_kind = str(block.get("loopType") or "for-each").strip().lower()
    kind = LOOP_TYPES.get(raw_kind)
    if kind is None:
        raise _fail(
            agent, "config.loopType", f"{raw_kind!r} is not a loop type; use for-each, for, while or until"
        )
    if block.get("maxIterations") in (None, ""):
        raise _fail(
            agent,
            "config.maxIterations",
            f"is {block.get('maxIterations')!r}: a Loop needs a bound; set maxIterations (e.g. 100)",
        )
    hint = "it bounds how often the loop body runs"
    bound = _positive_int(agent, "config.maxIterations", block["maxIterations"], MAX_LOOP_ITERATIONS, hint)
    # no arrayVariable (the IDE's default is ''): the list is the previous node's output, as for a Map
    array = _variable(agent, "config.arrayVariable", block.get("arrayVariable"), declared)
    item = block.get("itemVariable") or "item"
    if not isinstance(item, str) or not item.isidentifier():
        raise _fail(
            agent, "config.itemVariable", f"{item!r} is not a variable name (letters, digits and '_')"
        )
    condition = str(block.get("condition") or "")
    if kind in ("while", "until"):
        if not condition.strip():
            raise _fail(agent, "config.condition", f"a {kind} loop needs a condition (e.g. 'attempts < 3')")
        try:
            parse_condition(condition)
        except ConditionError as exc:
            raise _fail(agent, "config.condition", str(exc)) from None
    count = None
    if block.get("count") not in (None, ""):
        count = _positive_int(agent, "config.count", block["count"], MAX_LOOP_ITERATIONS, hint, zero=True)
    return LoopConfig(kind, bound, array, item, condition, count)


@dataclass(frozen=True)
class MapConfig:
    """A Map node: `operation` is map (every result, in order) or filter (the items whose result is true)."""

    operation: str
    max_concurrency: int
    array: str | None
    item: str


def map_config(agent: Mapping[str, Any], declared: Mapping[str, str]) -> MapConfig:
    """The Map node's config, checked.

    Raises:
        NodeConfigError: an unknown operation, a concurrency out of range, a list variable declared as
            something else.
    """
    block = _block(agent, "map_config")
    raw = block.get("operation")
    operation = MAP_OPERATIONS.get(str(raw or "").strip().lower())
    if operation is None:
        raise _fail(
            agent, "config.operation", f"{raw!r} is not an operation; use map (the default) or filter"
        )
    hint = f"it is how many items run at once (at most {MAX_MAP_CONCURRENCY})"
    concurrency = _positive_int(
        agent, "config.maxConcurrency", block.get("maxConcurrency", 5), MAX_MAP_CONCURRENCY, hint
    )
    # no arrayVariable: the list is the previous node's output
    array = _variable(agent, "config.arrayVariable", block.get("arrayVariable"), declared)
    item = block.get("itemVariable") or "item"
    if not isinstance(item, str) or not item.isidentifier():
        raise _fail(
            agent, "config.itemVariable", f"{item!r} is not a variable name (letters, digits and '_')"
        )
    return MapConfig(operation, concurrency, array, item)


@dataclass(frozen=True)
class FailsafeConfig:
    """A Failsafe node: how often the guarded node is tried again, and the bound of each attempt."""

    retries: int
    timeout_s: float | None


def failsafe_config(agent: Mapping[str, Any]) -> FailsafeConfig:
    """The Failsafe node's config, checked.

    Raises:
        NodeConfigError: retryAttempts or timeout that is not a number in range.
    """
    block = _block(agent, "failsafe_config")
    hint = "it is how many times the guarded node runs again after a failure"
    retries = _positive_int(
        agent, "config.retryAttempts", block.get("retryAttempts", 3), MAX_RETRY_ATTEMPTS, hint, zero=True
    )
    timeout = block.get("timeout", 30)
    if timeout in (None, "", 0):
        return FailsafeConfig(retries, None)
    try:
        seconds = float(timeout)
    except (TypeError, ValueError):
        seconds = -1.0
    if isinstance(timeout, bool) or not 0 < seconds <= 86_400:
        raise _fail(
            agent, "config.timeout", f"{timeout!r} must be a number of seconds above 0 (at most 86400)"
        )
    return FailsafeConfig(retries, seconds)


@dataclass(frozen=True)
class ReviewConfig:
    """A Self-Review node: what it checks, the score an output needs, how many rounds it may take."""

    completeness: bool
    accuracy: bool
    tone: bool
    threshold: float
    max_rounds: int
    prompt: str


def review_config(agent: Mapping[str, Any]) -> ReviewConfig:
    """The Self-Review node's config, checked (`maxIterations`, default 3, is the number of rounds).

    Raises:
        NodeConfigError: a threshold outside 0..1, a round count out of range.
    """
    block = _block(agent, "review_config")
    raw = block.get("confidenceThreshold", 0.8)
    try:
        threshold = float(raw)
    except (TypeError, ValueError):
        threshold = -1.0
    if isinstance(raw, bool) or not 0 <= threshold <= 1:
        raise _fail(agent, "config.confidenceThreshold", f"{raw!r} must be a number from 0 to 1 (e.g. 0.8)")
    rounds = block.get("maxIterations")
    if rounds in (None, ""):
        rounds = 3
    hint = "it is how many times the checked node may run, counting its first run"
    return ReviewConfig(
        completeness=block.get("checkCompleteness", True) is not False,
        accuracy=block.get("checkAccuracy", True) is not False,
        tone=bool(block.get("checkTone", False)),
        threshold=threshold,
        max_rounds=_positive_int(agent, "config.maxIterations", rounds, 10, hint),
        prompt=str(block.get("reviewPrompt") or ""),
    )


def as_list(value: Any) -> list[Any] | None:
    """`value` as a list: a list, or JSON text of one; None when it is neither."""
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except ValueError:
                return None
            return parsed if isinstance(parsed, list) else None
    return None


def item_text(item: Any) -> str:
    """An item as the text a node reads as its previous output."""
    return item if isinstance(item, str) else json.dumps(item, default=str)


def result_value(text: Any) -> Any:
    """A node's output as a list element: parsed when it is JSON, else the text."""
    if isinstance(text, str):
        stripped = text.strip()
        if stripped[:1] in ("{", "[", '"') or stripped in ("true", "false", "null"):
            try:
                return json.loads(stripped)
            except ValueError:
                return text
    return text
