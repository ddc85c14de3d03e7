"""The executor's route per tool version: what it decides once about a tool and reuses on every call.

A `Route` holds the compiled input and output validators, whether step 3 has defaults to fill, the input
keys with nothing to redact, and the backend's fast paths once asked. `RouteTable` finds them by tool id
and by the text refs resolved before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import InlineCall
from echo_tools.errors import ToolError
from echo_tools.events import is_secret_key
from echo_tools.models import ToolDef
from echo_tools.schema import SchemaValidator, compiled, scalar_properties

if TYPE_CHECKING:
    from echo_tools.backends.base import ToolBackend
    from echo_tools.models import ToolType

    BackendFor = Callable[[ToolType], ToolBackend]

UNDECIDED: Any = object()  # a fast path not asked for yet: the backend is asked on the route's first run
MAX_REFS = 4096  # refs come from LLMs too: the map of refs seen is cleared when it grows this large


@dataclasses.dataclass(eq=False)
class Route:
    """What the executor keeps per tool version: its validators and its fast paths, if its backend has any."""

    tool: ToolDef
    input_validator: SchemaValidator
    output_validator: SchemaValidator | None  # None when output_schema accepts anything
    fills_defaults: bool  # the input schema has top-level defaults to fill
    kind: str  # tool_type as text, for events
    check_input: Callable[[Any], bool] | None  # the compiled is_valid calls (None: accepts anything)
    check_output: Callable[[Any], bool] | None
    flat_keys: frozenset[str]  # input keys typed scalar and not secret: nothing in them to redact
    inline: Callable[[dict[str, Any]], Any] | None = UNDECIDED  # an InlineCall, or None: no inline path
    inline_fn: InlineCall | None = None  # the inline offer when it is a plain keyword-argument function
    blocking: Callable[[dict[str, Any], float], Any] | None = UNDECIDED  # for sync callers

    def decide_inline(self, backend_for: BackendFor) -> Callable[[dict[str, Any]], Any] | None:
        """Ask the backend once whether the tool runs in the calling thread; remember the answer."""
        call = _offer(backend_for, self.tool, "inline")
        if isinstance(call, InlineCall):
            self.inline_fn = call
        self.inline = call
        return call

    def decide_blocking(self, backend_for: BackendFor) -> Callable[[dict[str, Any], float], Any] | None:
        """Ask the backend once whether sync callers may wait on its worker thread directly."""
        call = self.blocking = _offer(backend_for, self.tool, "blocking")
        return call


def new_route(tool: ToolDef) -> Route:
    """The route of `tool`: its compiled validators and what its schemas say about defaults and secrets."""
    output = compiled(tool, "output")
    properties = tool.input_schema.get("properties")
    fills_defaults = isinstance(properties, dict) and any(
        isinstance(prop, dict) and "default" in prop for prop in properties.values()
    )
    validator = None if output.accepts_anything else output
    checker = compiled(tool, "input")
    flat_keys = frozenset(k for k in scalar_properties(tool.input_schema) if not is_secret_key(k))
    return Route(
        tool,
        checker,
        validator,
        fills_defaults,
        tool.tool_type.value,
        checker.check,
        output.check,
        flat_keys,
    )


class RouteTable:
    """Routes by tool id, and by the text refs that resolved to them (so a known ref skips `resolve`)."""

    def __init__(self) -> None:
        self.by_id: dict[str, Route] = {}
        self.by_ref: dict[str, Route] = {}  # cleared in place, never replaced: the executor holds it too

    def route(self, tool: ToolDef, ref: Any) -> Route:
        """The route of this very definition of `tool` (a new one once it is re-registered), kept under `ref`."""
        route = self.by_id.get(tool.tool_id)
        if route is None or route.tool is not tool:
            route = self.by_id[tool.tool_id] = new_route(tool)
        if type(ref) is str:
            if len(self.by_ref) >= MAX_REFS:
                self.by_ref.clear()
            self.by_ref[ref] = route
        return route

    def forget(self, tool_id: str | None = None) -> None:
        """Drop the route of one tool (every route when None) and every ref seen."""
        if tool_id is None:
            self.by_id.clear()
        else:
            self.by_id.pop(tool_id, None)
        self.by_ref.clear()


def passes(check: Callable[[Any], bool], value: Any) -> bool:
    """`check(value)`, false for values JSON cannot hold."""
    try:
        return check(value)
    except ValueError:  # jsonschema-rs refuses values JSON cannot hold (bytes, sets, datetimes)
        return False


def describe_problems(validator: SchemaValidator, value: Any, kind: str) -> list[str]:
    """What is wrong with `value` ("input.values[2]: ..."), for the error of a call it failed."""
    try:
        return validator.errors(value) or [f"{kind}: does not match the schema"]
    except ValueError as exc:
        return [
            f"{kind}: {exc}; only JSON values (objects, arrays, text, numbers, booleans, null) are accepted"
        ]


def _offer(backend_for: BackendFor, tool: ToolDef, path: str) -> Any:
    """The backend's `inline` or `blocking` fast path for `tool`, or None."""
    if tool.execution_config.get("max_concurrency"):
        return None  # a limited tool goes through the loop-bound semaphore
    try:
        offer = getattr(backend_for(tool.tool_type), path, None)
        return offer(tool) if offer is not None else None
    except ToolError:
        return None  # the general path reports the same problem as a failed call
