"""Hooks: code of the host that sees every call inside the executor's pipeline, and may stop or change it.

A hook is any object with `before(call)` and/or `after(call, result)` (`executor.add_hook(hook)`):

- `before(call)` runs after the input is validated, before the tool runs. It returns None (go on),
  `Deny(reason)` (the call fails with `error_type="denied"`, naming the hook and the reason) or
  `Replace(args)` (the call goes on with these arguments, validated again against the tool's schema).
- `after(call, result)` runs once the output has been checked. It returns None (keep the result) or a
  `ToolResult` that the caller gets instead.

Hooks run in the order they were added; a later hook sees the arguments an earlier one replaced. A hook
that raises fails the call closed: the tool does not run (or its result is withheld), and the error names
the hook. Guardrails, redaction and approval policies are hooks a user can write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from echo_tools.call import Call
from echo_tools.errors import ToolDeniedError, ToolError
from echo_tools.models import ToolContext, ToolDef, ToolResult

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence


class ToolCall(Call):
    """One call as hooks, approval policies and quotas see it, built by hand (a test, a benchmark): the
    tool, its validated arguments, the caller's context (ids, `user_id`, grants) and the call's id. The
    executor hands them its own `echo_tools.call.Call`, which has the same attributes."""

    __slots__ = ()

    def __init__(
        self, tool: ToolDef, args: dict[str, Any], context: ToolContext, number: str | int = ""
    ) -> None:
        super().__init__(tool, args, context, number, True)
        self.tool, self.args = tool, args


@dataclass(frozen=True)
class Deny:
    """A hook's answer: do not run the call; `reason` is what the caller (and the model) reads."""

    reason: str


@dataclass(frozen=True)
class Replace:
    """A hook's answer: run the call with `args` instead (validated again against the tool's schema)."""

    args: Mapping[str, Any]


class Hook(Protocol):
    """What `executor.add_hook` takes: an object with `before` and/or `after` (both optional)."""

    def before(self, call: Call) -> Deny | Replace | None: ...

    def after(self, call: Call, result: ToolResult) -> ToolResult | None: ...


def hook_name(hook: Any) -> str:
    """The name a hook is reported by: its `name` attribute, else its class name."""
    name = getattr(hook, "name", None)
    return name if isinstance(name, str) and name else type(hook).__name__


def check_hook(hook: Any) -> Any:
    """Return `hook` when it has a callable `before` or `after`, else raise `TypeError` saying so."""
    if not callable(getattr(hook, "before", None)) and not callable(getattr(hook, "after", None)):
        raise TypeError(
            f"a hook needs a before(call) and/or an after(call, result) method; {hook!r:.80} has neither"
        )
    return hook


def bound(hooks: Sequence[Any], method: str) -> tuple[tuple[Any, Callable[..., Any]], ...]:
    """(hook, its bound `method`) for every hook that has one: looked up once, when hooks change."""
    pairs = ((hook, getattr(hook, method, None)) for hook in hooks)
    return tuple((hook, fn) for hook, fn in pairs if fn is not None)


def hook_raised(call: Call, hook: Any, exc: Exception) -> ToolDeniedError:
    """The error of a call whose hook's `before` raised `exc`: it fails closed, naming the hook."""
    return _denied(call, hook, f"raised {type(exc).__name__}: {exc}; the call was not run")


def judge(
    call: Call,
    hook: Any,
    verdict: Any,
    validate: Callable[[dict[str, Any]], dict[str, Any] | ToolError],
) -> ToolError | None:
    """Apply a `before` hook's verdict other than None: the error that stops the call, or None when it
    goes on (`Replace`: with the replaced arguments, validated, in `call.args`)."""
    if isinstance(verdict, Deny):
        return _denied(call, hook, verdict.reason, denied=True)
    if isinstance(verdict, Replace):
        checked = validate(dict(verdict.args))
        if isinstance(checked, ToolError):
            checked.message = f"{checked.message} (arguments replaced by hook {hook_name(hook)!r})"
            checked.args = (checked.message,)
            return checked
        call.args = checked
        return None
    what = f"returned {verdict!r:.80}; before() must return None, Deny(reason) or Replace(args)"
    return _denied(call, hook, f"{what}; the call was not run")


def _denied(call: Call, hook: Any, text: str, *, denied: bool = False) -> ToolDeniedError:
    name = hook_name(hook)
    tool_id = call.tool.tool_id
    message = (
        f"Tool {tool_id!r}: denied by hook {name!r}: {text}"
        if denied
        else f"Tool {tool_id!r}: hook {name!r} {text}"
    )
    return ToolDeniedError(message, tool_id=tool_id, field="hook", hook=name)


def run_after(
    afters: Sequence[tuple[Any, Callable[[Call, ToolResult], Any]]], call: Call, result: ToolResult
) -> ToolResult:
    """The result the caller gets once every `after` hook has seen it (a raising hook withholds it);
    `afters` pairs each hook with its bound `after` (`bound(hooks, "after")`)."""
    for hook, after in afters:
        try:
            replaced = after(call, result)
        except Exception as exc:  # boundary: a failing hook fails the call closed, named
            replaced = _withheld(result, hook_name(hook), f"raised {type(exc).__name__}: {exc}")
        if replaced is None:
            continue
        if not isinstance(replaced, ToolResult):
            what = f"returned {replaced!r:.80} instead of a ToolResult or None"
            replaced = _withheld(result, hook_name(hook), what)
        result = replaced
    return result


def _withheld(result: ToolResult, name: str, what: str) -> ToolResult:
    return result.model_copy(
        update={
            "success": False,
            "output": None,
            "error": f"Tool {result.tool_id!r}: hook {name!r} {what}; the result was withheld",
            "error_type": "denied",
            "error_field": "hook",
            "metadata": {**result.metadata, "hook": name},
        }
    )
