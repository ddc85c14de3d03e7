"""The `skill` backend: runs a skill's steps through the executor, each as a nested call.

Steps whose dependencies are done run at once; a failed step tries its `fallback` tools in order; a step
whose `when` reference is falsy is skipped. Each inner call gets the caller's granted permissions, the
remaining deadline, `depth + 1` and the chain of composite tools above it, so inner calls are checked again,
cannot outlive the skill, and a skill that reaches itself at run time is stopped with the chain named.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import BackendOutput, ToolBackend, forget_entries
from echo_tools.errors import ToolExecutionError, ToolTimeoutError
from echo_tools.skills import MAX_CALL_DEPTH, SkillPlan, SkillStep, StepPlan, parse_skill, plan_skill

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.models import ToolContext, ToolDef


class _StepFailed(Exception):
    def __init__(self, step: SkillStep, message: str) -> None:
        super().__init__(message)
        self.step = step
        self.message = message


class _InnerContext:
    """The context of a skill's inner calls, whose timeout is what is left of the skill's deadline.

    Steps started in the same millisecond share one copy (a skill's independent steps all start at once).
    """

    def __init__(self, base: ToolContext, deadline: float) -> None:
        self.base = base
        self.deadline = deadline  # on the loop's clock
        self._ms = 0
        self._context = base

    def now(self) -> ToolContext | None:
        """The context for a call starting now; None once the deadline has passed."""
        remaining_ms = int((self.deadline - asyncio.get_running_loop().time()) * 1000)
        if remaining_ms <= 0:
            return None
        if remaining_ms != self._ms:
            self._ms, self._context = remaining_ms, self.base.model_copy(update={"timeout_ms": remaining_ms})
        return self._context


class SkillBackend(ToolBackend):
    """Runs `skill` tools; inner calls go back through the executor (events, limits, permissions)."""

    nests = True

    def __init__(self, executor: ToolExecutor) -> None:
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
        if tool.tool_id in context.call_path:
            chain = " -> ".join([*context.call_path, tool.tool_id])
            raise ToolExecutionError(f"Tool {tool.tool_id!r} calls itself: {chain}", tool_id=tool.tool_id)
        if context.depth >= MAX_CALL_DEPTH:
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r}: nested calls are {context.depth} deep, the limit is {MAX_CALL_DEPTH} "
                f"({' -> '.join(context.call_path)})",
                tool_id=tool.tool_id,
            )
        skill = self._skill(tool)
        loop = asyncio.get_running_loop()
        inner = _InnerContext(
            context.model_copy(
                update={
                    "parent_call_id": context.call_id,
                    "call_id": None,
                    "depth": context.depth + 1,
                    "call_path": [*context.call_path, tool.tool_id],
                }
            ),
            deadline=loop.time() + (context.timeout_ms or tool.timeout_ms) / 1000,
        )
        scope: dict[str, Any] = {"input": args, "steps": {}}
        report: dict[str, dict[str, Any]] = {}
        # what each step still waits for; a finished step starts the steps it was the last wait of
        waiting = {
            sid: set(plan.step.depends_on) for sid, plan in skill.steps.items() if plan.step.depends_on
        }
        running: set[asyncio.Task[None]] = set()
        all_done: asyncio.Future[None] = loop.create_future()  # the last step ended, or the first failed

        def start(plan: StepPlan) -> None:
            report[plan.step.id] = {"status": "running", "tool_id": None}
            task = loop.create_task(self._run_step(plan, scope, report, inner))
            running.add(task)
            task.add_done_callback(lambda task: ended(plan, task))

        def ended(plan: StepPlan, task: asyncio.Task[None]) -> None:
            running.discard(task)
            error = None if task.cancelled() else task.exception()  # read, so it is never left unretrieved
            if all_done.done():
                return
            if task.cancelled():  # only the skill cancels its steps, after it stopped waiting: never here
                all_done.cancel()
                return
            if error is not None:
                all_done.set_exception(error)
                return
            for dependent in plan.dependents:
                waiting[dependent].discard(plan.step.id)
                if not waiting[dependent]:
                    start(skill.steps[dependent])
            if not running:
                all_done.set_result(None)

        try:
            for root in skill.roots:
                start(skill.steps[root])
            await all_done
        except _StepFailed as failure:
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r}: step {failure.step.id!r} failed: {failure.message}",
                tool_id=tool.tool_id,
                field=f"steps.{failure.step.id}",
            ) from None
        finally:
            for task in running:
                task.cancel()
        if skill.output is None:
            output: Any = {sid: step["output"] for sid, step in scope["steps"].items()}
        else:
            output = skill.output(scope)
        return BackendOutput(output=output, metadata={"steps": report})

    async def _run_step(
        self,
        plan: StepPlan,
        scope: dict[str, Any],
        report: dict[str, dict[str, Any]],
        inner: _InnerContext,
    ) -> None:
        step = plan.step
        entry = report[step.id]
        try:
            if plan.when is not None and not plan.when(scope):
                entry.update(status="skipped")
                scope["steps"][step.id] = {"output": None}
                return
            step_input = plan.input(scope)
        except LookupError as exc:
            entry.update(status="failed", error=str(exc))
            raise _StepFailed(step, str(exc)) from None
        errors: list[str] = []
        for ref in [step.tool, *step.fallback]:
            context = inner.now()
            if context is None:
                entry.update(status="failed", error="the skill's deadline passed")
                raise ToolTimeoutError(
                    f"step {step.id!r}: the skill's deadline passed before {ref!r} could run"
                )
            result = await self.executor.invoke(ref, step_input, context)
            if result.success:
                entry.update(status="completed", tool_id=result.tool_id, failed_before=errors)
                scope["steps"][step.id] = {"output": result.output}
                return
            errors.append(f"{result.tool_id}: {result.error}")
        entry.update(status="failed", error="; ".join(errors))
        raise _StepFailed(step, "; ".join(errors))
