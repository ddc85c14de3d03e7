"""How much one request or run may spend: `Budget` (the limits) and `BudgetMeter` (the running total).

A meter is shared by every nested call of the request or run, so a fan-out cannot multiply it; the
executor admits each call against it (`admit`) and counts its time in flight and its output (`metered`).
A paused run keeps its meter's totals (`BudgetMeter.totals`) and carries on with them
(`BudgetMeter.resumed`): one budget per run, across every resume.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Coroutine, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ToolBudgetError, ToolConfigError

if TYPE_CHECKING:
    from echo_tools.models import ToolContext, ToolDef, ToolResult

MIB = 1024 * 1024


@dataclass(frozen=True)
class Budget:
    """What one request or run may spend, in total, through every nested call."""

    max_calls: int = 1000
    max_depth: int = 8
    max_fanout: int = 64  # calls in flight at once below the request's first call
    deadline_s: float = 300.0  # of running time: a paused run's clock stops while it waits
    max_output_bytes: int = 64 * MIB
    max_llm_calls: int = 50  # MCP sampling requests
    max_llm_tokens: int = 50_000  # their prompt and answer tokens together

    def __post_init__(self) -> None:
        for name in ("max_calls", "max_depth", "max_fanout", "deadline_s", "max_output_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ToolConfigError(f"budget.{name} must be a positive number, got {value!r}", field=name)
        for name in ("max_llm_calls", "max_llm_tokens"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ToolConfigError(f"budget.{name} must be an integer >= 0, got {value!r}", field=name)

    def within(self, other: Budget) -> Budget:
        """The narrower of this budget and `other`, limit by limit."""
        mine, theirs = asdict(self), asdict(other)
        return Budget(**{k: min(v, theirs[k]) for k, v in mine.items()})


_TOTALS = ("calls", "output_bytes", "llm_calls", "llm_tokens")


class BudgetMeter:
    """The running total of one request or run against its `Budget`; shared (and thread-safe) by every
    nested call, so each call, the depth, the calls in flight, the output and MCP sampling all count once."""

    __slots__ = (
        "_lock",
        "budget",
        "calls",
        "deadline",
        "in_flight",
        "llm_calls",
        "llm_tokens",
        "output_bytes",
        "queued",
    )

    def __init__(self, budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        self.calls = 0
        self.in_flight = 0
        self.queued = 0  # inner calls composite tools have started and not yet seen end (`reserve`)
        self.output_bytes = 0
        self.llm_calls = 0
        self.llm_tokens = 0
        self.deadline = time.monotonic() + self.budget.deadline_s
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"BudgetMeter(calls={self.calls}, in_flight={self.in_flight}, output_bytes={self.output_bytes})"
        )

    # -- kept across a pause ---------------------------------------------------------------------------

    def totals(self) -> dict[str, Any]:
        """What a paused run keeps of its meter: the budget, what was spent and the running time left."""
        with self._lock:
            spent = {name: getattr(self, name) for name in _TOTALS}
        return {"budget": asdict(self.budget), **spent, "remaining_s": max(0.0, self.remaining_s())}

    @classmethod
    def resumed(cls, totals: Mapping[str, Any], ceiling: Budget | None = None) -> BudgetMeter:
        """A meter carrying on from `totals` (what `totals()` returned when the run paused), under the
        narrower of the kept budget and `ceiling` (the owner's budget now).

        Raises:
            ToolConfigError: `totals` is not what `totals()` returns (naming the field).
        """
        try:
            budget = Budget(**dict(totals["budget"]))
            spent = {name: int(totals[name]) for name in _TOTALS}
            remaining = float(totals["remaining_s"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ToolConfigError(f"a kept budget is malformed ({exc!r:.80})", field="scope.meter") from None
        if min(*spent.values(), remaining) < 0:
            raise ToolConfigError(f"a kept budget has a negative total: {spent}", field="scope.meter")
        meter = cls(budget if ceiling is None else budget.within(ceiling))
        for name, value in spent.items():
            setattr(meter, name, value)
        meter.deadline = time.monotonic() + min(remaining, meter.budget.deadline_s)
        return meter

    # -- counting --------------------------------------------------------------------------------------

    def remaining_s(self) -> float:
        return self.deadline - time.monotonic()

    def admit(self, tool_id: str, depth: int) -> ToolBudgetError | None:
        """Count one call starting at `depth`; the error naming the limit it would pass, else None."""
        b = self.budget
        with self._lock:
            if self.calls >= b.max_calls:
                return _spent(tool_id, "max_calls", b.max_calls, f"{self.calls} calls were made")
            if depth > b.max_depth:
                return _spent(tool_id, "max_depth", b.max_depth, f"this call is at depth {depth}")
            if depth > 0 and self.in_flight - 1 > b.max_fanout:  # the first call is in flight too
                return _spent(
                    tool_id, "max_fanout", b.max_fanout, f"{self.in_flight - 1} calls are in flight"
                )
            if self.output_bytes >= b.max_output_bytes:
                return _spent(
                    tool_id,
                    "max_output_bytes",
                    b.max_output_bytes,
                    f"{self.output_bytes} bytes were returned",
                )
            if time.monotonic() >= self.deadline:
                return _spent(tool_id, "deadline_s", b.deadline_s, "the request's deadline passed")
            self.calls += 1
        return None

    def reserve(self, tool_id: str) -> ToolBudgetError | None:
        """A composite tool is about to start an inner call: reserve a place among the calls in flight
        (counted from the moment the work is built, not when it starts running), or the error naming the
        limit. Every reservation is given back with `release`."""
        b = self.budget
        with self._lock:
            if self.calls >= b.max_calls:
                return _spent(tool_id, "max_calls", b.max_calls, f"{self.calls} calls were made")
            if self.queued >= b.max_fanout:
                return _spent(
                    tool_id, "max_fanout", b.max_fanout, f"{self.queued} nested calls are in flight"
                )
            self.queued += 1
        return None

    def release(self) -> None:
        with self._lock:
            self.queued -= 1

    def enter(self) -> None:
        with self._lock:
            self.in_flight += 1

    def leave(self, output: Any) -> ToolBudgetError | None:
        """A call ended with `output`: count its size; the error when the total passed the limit."""
        size = _size(output)
        with self._lock:
            self.in_flight -= 1
            self.output_bytes += size
            total = self.output_bytes
        limit = self.budget.max_output_bytes
        if total > limit:
            return _spent(None, "max_output_bytes", limit, f"{total} bytes were returned")
        return None

    def sample(self, tokens: int, prompt_tokens: int = 0) -> ToolBudgetError | None:
        """Count one MCP sampling request: its prompt (`prompt_tokens`, the server's text sent to the model)
        and up to `tokens` tokens of answer; the error when over budget."""
        b = self.budget
        asked = tokens + max(0, prompt_tokens)
        with self._lock:
            if self.llm_calls >= b.max_llm_calls:
                return _spent(
                    None, "max_llm_calls", b.max_llm_calls, f"{self.llm_calls} sampling calls were made"
                )
            if self.llm_tokens + asked > b.max_llm_tokens:
                left = b.max_llm_tokens - self.llm_tokens
                detail = f"{asked} asked ({prompt_tokens} of prompt, {tokens} of answer), {left} left"
                return _spent(None, "max_llm_tokens", b.max_llm_tokens, detail)
            self.llm_calls += 1
            self.llm_tokens += asked
        return None

    def refund_tokens(self, unused: int) -> None:
        """Give back the tokens a sampling answer did not use (it was counted at its `maxTokens`)."""
        if unused > 0:
            with self._lock:
                self.llm_tokens = max(0, self.llm_tokens - unused)


def estimate_tokens(text: str) -> int:
    """The tokens a model counts in `text`, estimated without its tokenizer: one per 4 bytes of UTF-8 (about
    a word piece of English; more for other scripts, whose characters take more bytes)."""
    return -(-len(text.encode("utf-8")) // 4)


def _spent(tool_id: str | None, limit: str, value: float, detail: str) -> ToolBudgetError:
    what = f"Tool {tool_id!r} refused" if tool_id else "Refused"
    return ToolBudgetError(
        f"{what}: the request's budget {limit}={value!r} is exhausted ({detail}); "
        "ask the operator for a larger budget or split the work",
        tool_id=tool_id,
        field=f"budget.{limit}",
    )


def _size(output: Any) -> int:
    if output is None or isinstance(output, bool):
        return 0
    if isinstance(output, (str, bytes)):
        return len(output)
    if isinstance(output, (int, float)):
        return 8
    try:
        return len(json.dumps(output, default=str, ensure_ascii=False))
    except (TypeError, ValueError):
        return len(repr(output))


# -- the executor's side: one call at its budget stage, one wrapper around the pipeline -------------------


def admit(tool: ToolDef, context: ToolContext) -> ToolBudgetError | None:
    """The budget stage of the executor, for a context that carries a meter: the call counts against it."""
    meter = context.budget
    if meter is None:
        return None
    return meter.admit(tool.tool_id, context.depth)  # type: ignore[no-any-return]


async def metered(call: Coroutine[Any, Any, ToolResult], context: ToolContext) -> ToolResult:
    """Await one pipeline run with the context's meter counting it in flight and its output; a result
    whose output passes the budget's byte limit becomes a `budget` failure. Never suspends on its own,
    so the executor's synchronous driver can run it too."""
    meter: BudgetMeter = context.budget
    meter.enter()
    output: Any = None
    try:
        result = await call
        output = result.output
    finally:
        over = meter.leave(output)
    if over is not None and result.success:
        return result.model_copy(
            update={
                "success": False,
                "output": None,
                "error": over.message,
                "error_type": "budget",
                "error_field": over.field,
            }
        )
    return result
