"""One call as one object: `Call` is what the executor's stages work on, from the reference a caller gave to
the result it gets back.

It holds the resolved tool version (`tool`, whose `digest` an approval keeps), the validated arguments, the
call's id and its parent's, and the context it was made with, whose scope (`Call.scope`, an
`echo_tools.gate.CallScope`: principal, end user, ceiling, budget meter, run) its nested calls inherit.
Hooks, approval policies and quotas see the same object (`echo_tools.governance.hooks.ToolCall`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from echo_tools.events import format_call_id
from echo_tools.models import ToolContext

if TYPE_CHECKING:
    from echo_tools.errors import ToolError
    from echo_tools.gate import CallScope
    from echo_tools.models import ToolDef
    from echo_tools.routes import Route

__all__ = ["NO_CONTEXT", "Call"]

_perf = time.perf_counter


NO_CONTEXT = ToolContext()  # the context of calls made without one (never changed)


class Call:
    """One call moving through the executor's stages (see the module docstring).

    Set at the start: `ref`, `input`, `context`, `on_loop` (an awaiting caller; False: `invoke_sync`),
    `started`, `number`. Then by the stages in turn: `tool` and `route` (resolve), `args` (validate),
    `fields` (the events' shared fields, once announced), `approval_id` (governance), `output`, `error`
    and `attempts` (the backend's attempts), `metered` (the budget meter counts it in flight).
    """

    __slots__ = (
        "approval_id", "args", "attempts", "context", "error", "fields", "input", "metered", "number",
        "on_loop", "output", "ref", "route", "started", "tool",
    )  # fmt: skip

    def __init__(
        self, ref: Any, input_data: Any, context: ToolContext, number: str | int, on_loop: bool
    ) -> None:
        self.ref, self.input, self.context, self.number, self.on_loop = (
            ref,
            input_data,
            context,
            number,
            on_loop,
        )
        self.started = _perf()
        self.tool: ToolDef = None  # type: ignore[assignment]  # set by the resolve stage before it is read
        self.args: dict[str, Any] = None  # type: ignore[assignment]  # set by the validate stage
        self.approval_id: str | None = None
        self.route: Route | None = None
        self.fields: dict[str, Any] | None = None
        self.output: Any = None
        self.error: ToolError | None = None
        self.attempts = 0
        self.metered = False

    def __repr__(self) -> str:
        tool = self.tool.tool_id if self.tool is not None else self.ref
        return f"Call({tool!r}, call_id={self.call_id!r})"

    @property
    def call_id(self) -> str:
        """The call's id, as its events carry it."""
        number = self.number
        return number if isinstance(number, str) else format_call_id(number)

    @property
    def parent_call_id(self) -> str | None:
        return self.context.parent_call_id

    @property
    def tool_id(self) -> str:
        return self.tool.tool_id

    @property
    def digest(self) -> str:
        """The digest of the tool version this call runs (`ToolDef.digest`)."""
        return self.tool.digest

    @property
    def user_id(self) -> str | None:
        return self.context.user_id

    @property
    def run_id(self) -> str | None:
        return self.context.run_id

    @property
    def scope(self) -> CallScope:
        """Who makes the call and under which limits (`echo_tools.gate.CallScope`)."""
        from echo_tools.gate import CallScope

        return CallScope.of(self.context)
