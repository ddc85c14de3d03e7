"""The `skill` backend: runs a skill's steps through the executor, each as a nested call.

Steps whose dependencies are done run at once; a failed step tries its `fallback` tools in order; a step
whose `when` reference is falsy is skipped. Each inner call gets the caller's granted permissions, the
remaining deadline, `depth + 1`, the chain of composite tools above it and the request's budget meter (the
same object: fan-out cannot multiply the budget), so inner calls are checked again, cannot outlive the skill,
and a skill that reaches itself at run time is stopped with the chain named; a spent budget ends the skill
as a `budget` failure, with no fallback tried.
"""

from __future__ import annotations

import asyncio
import functools
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import BackendHost, BackendOutput, ToolBackend, forget_entries
from echo_tools.errors import ToolBudgetError, ToolExecutionError, ToolTimeoutError
from echo_tools.skills import SkillPlan, SkillStep, StepPlan, check_nesting, parse_skill, plan_skill

if TYPE_CHECKING:
    from collections.abc import Sequence

    from echo_tools.egress import EgressPolicy
    from echo_tools.models import ToolContext, ToolDef, ToolResult


class _StepFailed(Exception):
    def __init__(self, step: SkillStep, message: str) -> None:
        super().__init__(message)
        self.step = step
        self.message = message


class SkillBackend(ToolBackend):
    """Runs `skill` tools; inner calls go back through the executor (events, limits, permissions)."""

    nests = True

    @classmethod
    def check_config(
        cls, tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
    ) -> None:
        parse_skill(tool.tool_id, tool.execution_config)

    def __init__(self, executor: BackendHost) -> None:
        self.executor = executor
        self._parsed: dict[str, tuple[ToolDef, SkillPlan]] = {}  # tool id -> (the definition, its plan)

    def _skill(self, tool: ToolDef) -> SkillPlan:
        cached = self._parsed.get(tool.tool_id)
        if cached is not None and cached[0] is tool:  # the registry hands out a new object on change
            return cached[1]
        skill = plan_skill(parse_skill(tool.tool_id, tool.execution_config))
        self._parsed[tool.tool_id] = (tool, skill)
        return skill

    def forget(self, tool_id: str | None = None) -> None:
        forget_entries(self._parsed, tool_id)

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> Any:
        check_nesting(tool.tool_id, context)
        run = _SkillRun(self.executor, self._skill(tool), tool, args, context)
        try:
            output = await run.finished()
        except _StepFailed as failure:
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r}: step {failure.step.id!r} failed: {failure.message}",
                tool_id=tool.tool_id,
                field=f"steps.{failure.step.id}",
            ) from None
        finally:
            run.cancel()
        return BackendOutput(output=output, metadata={"steps": run.report})


class _SkillRun:
    """One run of a skill: each step is one executor call at a time (its tool, then its fallbacks), started
    as a task whose completion callback records it and starts the steps it was the last wait of.

    No coroutine of its own per step: a step's input and `when` are resolved in the callback that starts
    it, so a step costs what the call costs, plus one entry in `report`. The inner calls' context is
    the skill's, one level deeper, whose timeout is what is left of the skill's deadline: made in one
    copy when the first step starts, shared by the steps started in the same millisecond.
    """

    def __init__(
        self,
        executor: BackendHost,
        skill: SkillPlan,
        tool: ToolDef,
        args: dict[str, Any],
        context: ToolContext,
    ) -> None:
        self.executor = executor
        self.skill = skill
        self.loop = loop = asyncio.get_running_loop()
        self.deadline = loop.time() + (context.timeout_ms or tool.timeout_ms) / 1000  # on the loop's clock
        self.outer = context
        self.call_path = [*context.call_path, tool.tool_id]
        self.inner_ms = 0  # the timeout of `inner`
        self.inner: ToolContext | None = None
        self.outputs: dict[str, dict[str, Any]] = {}  # step id -> {"output": ...}, what references read
        self.scope: dict[str, Any] = {"input": args, "steps": self.outputs}
        self.report: dict[str, Any] = dict.fromkeys(skill.steps)  # in declared order, filled as steps end
        # what each step still waits for; a finished step starts the steps it was the last wait of
        self.waiting = {sid: set(deps) for sid, deps in skill.waits.items()}
        self.left = len(skill.steps)
        self.tasks: list[asyncio.Task[ToolResult]] = []  # every call started (cancelled when it stops)
        self.done: asyncio.Future[None] = loop.create_future()  # the last step ended, or the first failed

    async def finished(self) -> Any:
        """Run every step; the skill's output. Raises the first failure (`_StepFailed`, a timeout)."""
        for root in self.skill.roots:
            self._start(self.skill.steps[root])
            if self.done.done():
                break
        await self.done
        if self.skill.output is None:
            return {sid: self.outputs[sid]["output"] for sid in self.skill.steps}
        return self.skill.output(self.scope)

    def cancel(self) -> None:
        for task in self.tasks:
            task.cancel()  # nothing for one that ended

    def _fail(self, error: BaseException) -> None:
        if not self.done.done():
            self.done.set_exception(error)

    def _start(self, plan: StepPlan) -> None:
        step = plan.step
        try:
            if plan.when is not None and not plan.when(self.scope):
                self.report[step.id] = {"status": "skipped", "tool_id": None}
                self.outputs[step.id] = {"output": None}
                self._ended(plan)
                return
            step_input = plan.input(self.scope)
        except LookupError as exc:
            self._fail(_StepFailed(step, str(exc)))
            return
        self._attempt(plan, step_input, 0, [])

    def _attempt(self, plan: StepPlan, step_input: Any, index: int, errors: list[str]) -> None:
        ref = plan.refs[index]
        remaining_ms = int((self.deadline - self.loop.time()) * 1000)
        if remaining_ms <= 0:
            self._fail(
                ToolTimeoutError(
                    f"step {plan.step.id!r}: the skill's deadline passed before {ref!r} could run"
                )
            )
            return
        meter = self.outer.budget
        if meter is not None:  # a place among the request's calls in flight, or no more work is built
            spent = meter.reserve(str(ref))
            if spent is not None:
                self._fail(ToolBudgetError(f"step {plan.step.id!r}: {spent.message}", field=spent.field))
                return
        context = self.inner
        if remaining_ms != self.inner_ms or context is None:
            outer = self.outer
            update: dict[str, Any] = {"timeout_ms": remaining_ms}
            if context is None:
                update.update(
                    parent_call_id=outer.call_id,
                    call_id=None,
                    depth=outer.depth + 1,
                    call_path=self.call_path,
                )
            context = self.inner = (context or outer).model_copy(update=update)
            self.inner_ms = remaining_ms
        task = self.loop.create_task(self.executor.invoke(ref, step_input, context))
        self.tasks.append(task)
        task.add_done_callback(functools.partial(self._attempted, plan, step_input, index, errors))

    def _attempted(
        self, plan: StepPlan, step_input: Any, index: int, errors: list[str], task: asyncio.Task[ToolResult]
    ) -> None:
        if self.outer.budget is not None:
            self.outer.budget.release()  # the place `_attempt` reserved
        if task.cancelled():  # only the skill cancels its calls, once it stopped waiting
            return
        error = task.exception()  # read, so it is never left unretrieved
        if self.done.done():  # a step failed before: the skill has stopped
            return
        if error is not None:
            self._fail(error)
            return
        result = task.result()
        step = plan.step
        try:
            if result.success:
                entry: dict[str, Any] = {"status": "completed", "tool_id": result.tool_id}
                if errors:
                    entry["failed_before"] = errors
                self.report[step.id] = entry
                self.outputs[step.id] = {"output": result.output}
                self._ended(plan)
                return
            if result.error_type == "budget":  # the request's budget is spent: no fallback may run either
                self._fail(ToolBudgetError(f"step {step.id!r}: {result.error}", field=result.error_field))
                return
            errors.append(f"{result.tool_id}: {result.error}")
            if index + 1 < len(plan.refs):
                self._attempt(plan, step_input, index + 1, errors)
            else:
                self._fail(_StepFailed(step, "; ".join(errors)))
        except Exception as exc:  # boundary: a callback's error must end the skill, not reach the loop's log
            self._fail(exc)

    def _ended(self, plan: StepPlan) -> None:
        """A step is done (completed or skipped): start the steps that waited only for it."""
        self.left -= 1
        for dependent in plan.dependents:
            waiting = self.waiting[dependent]
            waiting.discard(plan.step.id)
            if not waiting:
                self._start(self.skill.steps[dependent])
        if not self.left and not self.done.done():
            self.done.set_result(None)
