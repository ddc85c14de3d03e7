"""The executor's route per tool version: what it decides once about a tool and reuses on every call.

A `Route` holds the compiled input and output validators, whether step 3 has defaults to fill, the input
keys with nothing to redact, how long results may be reused, and, once asked, the backend's `sync_call`
for the tool; `Route.checked_input` is steps 3-4 with them (the pipeline's, and a hook's replaced
arguments'). `RouteTable` keeps them by tool id, for as long as the registry holds that very definition.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import SyncCall, forget_entries
from echo_tools.errors import ToolError, ToolValidationError
from echo_tools.models import ToolDef
from echo_tools.redaction import is_secret_key
from echo_tools.result_cache import cache_ttl
from echo_tools.schema import SchemaValidator, compiled, normalize_args, scalar_properties

if TYPE_CHECKING:
    from echo_tools.backends.base import ToolBackend

UNDECIDED: Any = object()  # the backend was not asked yet: it is on the route's first run
_deciding = threading.Lock()


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
    cache_ttl_s: float | None = None  # results are reused this long (a deterministic, pure tool); None: never
    sync: SyncCall | None = UNDECIDED  # the backend's sync_call for the tool (None: run through `call`)
    deciding: concurrent.futures.Future[SyncCall | None] | None = dataclasses.field(default=None, repr=False)
    runs: tuple[Callable[[Any], Any], ...] | None = None  # the executor's stages that apply, once chosen

    def checked_input(self, input_data: Any) -> dict[str, Any] | ToolError:
        """Steps 3 and 4: the normalised input (our own copy), or the error naming the bad field."""
        tool = self.tool
        if input_data is None:
            input_data = {}
        elif not isinstance(input_data, dict):
            return ToolValidationError(
                f"Tool {tool.tool_id!r}: input must be a JSON object, got {input_data!r:.200}",
                tool_id=tool.tool_id,
                field="input",
            )
        args = normalize_args(tool.input_schema, input_data) if self.fills_defaults else input_data
        if args is input_data:
            args = dict(input_data)
        check = self.check_input
        if check is None or passes(check, args):
            return args
        if not self.fills_defaults and None in args.values():
            # a None that normalising drops (optional key, schema without null) always fails the schema,
            # so only an input that failed can have one: normalise it now and check again
            args = normalize_args(tool.input_schema, args)
            if passes(check, args):
                return args
        problems = describe_problems(self.input_validator, args, "input")
        paths = [problem.split(":", 1)[0] for problem in problems]
        return ToolValidationError(
            f"Tool {tool.tool_id!r}: invalid input: {'; '.join(problems)}",
            tool_id=tool.tool_id,
            field=next((p for p in paths if p != "input"), "input"),  # the most specific field named
        )

    def decide_sync(self, backend: ToolBackend) -> SyncCall | None:
        """Ask the backend once whether the tool is a plain sync function; remember the answer."""
        if self.tool.execution_config.get("max_concurrency"):
            self.sync = None  # a limited tool goes through the loop-bound semaphore
        else:
            try:
                self.sync = backend.sync_call(self.tool)
            except ToolError:
                self.sync = None  # `call` reports the same problem as a failed call
        return self.sync

    def decide_sync_elsewhere(self, backend: ToolBackend) -> concurrent.futures.Future[SyncCall | None]:
        """`decide_sync` on a thread of its own (it may import the tool's module), once: callers on an
        event loop await this one future meanwhile, and take no worker from the tools."""
        with _deciding:
            future = self.deciding
            if future is None:
                future = self.deciding = concurrent.futures.Future()
                thread = threading.Thread(target=self._decide_into, args=(backend, future), daemon=True)
                thread.start()
        return future

    def _decide_into(self, backend: ToolBackend, future: concurrent.futures.Future[SyncCall | None]) -> None:
        try:
            future.set_result(self.decide_sync(backend))
        except BaseException as exc:  # boundary: whatever went wrong reaches the callers waiting
            future.set_exception(exc)


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
        cache_ttl(tool),
    )


class RouteTable:
    """Routes by tool id; a re-registered tool (a new definition object) gets a new route."""

    def __init__(self) -> None:
        self.by_id: dict[str, Route] = {}

    def route(self, tool: ToolDef) -> Route:
        """The route of this very definition of `tool`."""
        route = self.by_id.get(tool.tool_id)
        if route is None or route.tool is not tool:
            route = self.by_id[tool.tool_id] = new_route(tool)
        return route

    def forget(self, tool_id: str | None = None) -> None:
        """Drop the route of one tool (every route when None)."""
        forget_entries(self.by_id, tool_id)

    def replan(self) -> None:
        """Choose every route's stages again on its next call (what applies to a tool has changed)."""
        for route in list(self.by_id.values()):
            route.runs = None


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
