"""Every catalogue tool as a CrewAI `BaseTool` whose calls all go through the `ToolExecutor`.

Both of CrewAI's tool paths end in our `_run`: native function calling (`BaseTool.run`) and the ReAct text
format (`CrewStructuredTool.invoke`). Arguments reach the executor as the LLM sent them, minus the nulls it
sends for optional fields; the executor validates against the JSON Schema, and a failed call comes back as
a `ToolFailure` whose text tells the model what to fix, so CrewAI records it as a failure.
"""

from __future__ import annotations

import asyncio
import json
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from crewai.tools import BaseTool
from crewai.tools.structured_tool import CrewStructuredTool, ToolUsageLimitExceededError
from crewai.tools.tool_failure import ToolFailure, ToolFailureReason
from crewai.utilities.string_utils import sanitize_tool_name
from pydantic import BaseModel, Field, PrivateAttr

from echo_tools.llm_text import text_for_llm
from echo_tools.models import ToolContext, ToolDef, ToolResult
from echo_tools.runtime import run_sync
from workflow_bridge.compat.crewai import StructuredToolBase, count_use, original_tool, set_original_tool
from workflow_bridge.tool_view import (
    ToolView,
    args_model,
    as_context,
    nullable_optionals,
    resolve_bindings,
)

if TYPE_CHECKING:
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry

__all__ = ["ExecutorCrewTool", "to_crewai_tool", "to_crewai_tools"]


def _never_cache(_args: Any = None, _result: Any = None) -> bool:
    """CrewAI's result cache stays off: the executor owns retries, and tools may have side effects."""
    return False


class _Calls:
    """How one CrewAI tool calls the executor (a plain object: pydantic private attributes are slow to read)."""

    __slots__ = ("context", "executor", "name", "tool_id", "view")

    def __init__(self, executor: ToolExecutor, view: ToolView, context: ToolContext, name: str) -> None:
        self.executor, self.view, self.context, self.name = executor, view, context, name
        self.tool_id = view.tool.tool_id

    def run(self, kwargs: dict[str, Any]) -> str | ToolFailure:
        args = self.view.call_args(kwargs)
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop in this thread: wait here
            result = self.executor.invoke_sync(self.tool_id, args, self.context)
        else:
            # a loop runs in this thread (an async crew calling sync tools): never block it re-entrantly,
            # run on the one shared background loop instead
            result = run_sync(self.executor.invoke(self.tool_id, args, self.context))
        return self.observation(result)

    async def arun(self, kwargs: dict[str, Any]) -> str | ToolFailure:
        return self.observation(
            await self.executor.invoke(self.tool_id, self.view.call_args(kwargs), self.context)
        )

    def observation(self, result: ToolResult) -> str | ToolFailure:
        text = text_for_llm(result, self.view.tool, name=self.name)
        if result.success:
            return text
        kind = result.error_type or "execution"
        return ToolFailure(
            message=text,
            reason=ToolFailureReason.INVALID_INPUT
            if kind == "validation"
            else ToolFailureReason.TOOL_REPORTED,
            retryable=kind == "timeout",
            details={"tool_id": result.tool_id, "error_type": kind},
        )


class ExecutorCrewTool(BaseTool):
    """A catalogue tool as a CrewAI tool. Build it with `to_crewai_tool`, not directly."""

    tool_id: str = Field(description="The catalogue id of the tool this CrewAI tool runs.")
    _calls: Any = PrivateAttr(default=None)

    @property
    def view(self) -> ToolView:
        """The tool as the LLM sees it (binding applied)."""
        return typing.cast(ToolView, self._calls.view)

    @property
    def context(self) -> ToolContext:
        """The context every call carries (the bound agent's ids)."""
        return typing.cast(ToolContext, self._calls.context)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """CrewAI's native path. Without a usage limit there is nothing to claim: go straight to the call."""
        if args or self.max_usage_count is not None:
            return super().run(*args, **kwargs)
        return self._calls.run(kwargs)

    def _validate_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        # The executor validates against the JSON Schema with messages naming the field; CrewAI's
        # pydantic pass would reject with its own wording and coerce values (formats, URLs) lossily.
        return kwargs

    def _run(self, **kwargs: Any) -> str | ToolFailure:
        return typing.cast("str | ToolFailure", self._calls.run(kwargs))

    async def _arun(self, **kwargs: Any) -> str | ToolFailure:
        return typing.cast("str | ToolFailure", await self._calls.arun(kwargs))

    @property
    def formatted_description(self) -> str:
        """The ReAct prompt block, with the tool's own schema (CrewAI's marks every field required)."""
        return _react_block(self.name, self.view.input_schema, self.description)

    def to_structured_tool(self) -> CrewStructuredTool:
        """The ReAct path's view of this tool; it hands the parsed arguments to `_run` unvalidated."""
        structured = _ExecutorStructuredTool(
            name=self.name,
            description=self.description,
            args_schema=self.args_schema,
            result_schema=self.result_schema,
            func=self._run,
            result_as_answer=self.result_as_answer,
            max_usage_count=self.max_usage_count,
            current_usage_count=self.current_usage_count,
            cache_function=self.cache_function,
            tool_failure_policy=self.tool_failure_policy,
        )
        set_original_tool(structured, self)
        return structured


def _react_block(name: str, schema: dict[str, Any], description: str) -> str:
    return f"Tool Name: {name}\nTool Arguments: {json.dumps(schema)}\nTool Description: {description}"


class _ExecutorStructuredTool(StructuredToolBase):
    """CrewAI's structured tool without its pydantic argument pass, and with a real async path."""

    @property
    def formatted_description(self) -> str:
        return original_tool(self).formatted_description

    def parse_arguments(self, raw_args: str | dict[str, Any]) -> dict[str, Any]:
        if isinstance(raw_args, str):
            try:
                raw_args = json.loads(raw_args) if raw_args.strip() else {}
            except json.JSONDecodeError as exc:
                raise ValueError(f"Failed to parse arguments as JSON: {exc}") from exc
        if not isinstance(raw_args, dict):
            raise ValueError(
                f"Tool {self.name!r} takes a JSON object of arguments, got {type(raw_args).__name__}: "
                f"{raw_args!r:.200}"
            )
        return raw_args

    async def ainvoke(
        self, input: str | dict[str, Any], config: dict[str, Any] | None = None, **kwargs: Any
    ) -> Any:
        parsed = self.parse_arguments(input)
        if self.has_reached_max_usage_count():
            raise ToolUsageLimitExceededError(
                f"Tool {self.name!r} has reached its maximum usage limit of {self.max_usage_count}."
            )
        count_use(self)
        return await original_tool(self)._arun(**parsed, **kwargs)


def to_crewai_tool(
    tool: ToolDef,
    executor: ToolExecutor,
    context: ToolContext | Mapping[str, Any] | None = None,
    *,
    binding: Mapping[str, Any] | None = None,
    name: str | None = None,
) -> ExecutorCrewTool:
    """Wrap one catalogue tool as a CrewAI tool whose every call goes through `executor`.

    Args:
        tool: the catalogue entry (its `input_schema` becomes the `args_schema`).
        executor: runs the calls.
        context: the ids of the agent the tool is bound to (`agent_id`, `workflow_id`, `run_id`, `node_id`)
            and its limits; carried into every event of every call.
        binding: the canvas binding: `fixed` parameters are hidden from the LLM and merged into every call,
            `description` replaces the tool's description.
        name: the LLM-facing name; default the tool's `llm_name`, sanitized the way CrewAI does it.

    Raises:
        ValueError: the binding fixes a parameter the tool does not have, or is disabled.
    """
    if binding is not None and binding.get("enabled", True) is False:
        raise ValueError(f"The binding of tool {tool.tool_id!r} is disabled (enabled: false); do not bind it")
    view = ToolView(tool, binding)
    llm_name = sanitize_tool_name(name or view.name) or "tool"
    model_name = "".join(part.title() for part in llm_name.split("_")) + "Args"
    crew_tool = ExecutorCrewTool(
        name=llm_name,
        description=view.description,
        args_schema=args_model(model_name, view.input_schema, nullable_optionals(view.input_schema)),
        tool_id=tool.tool_id,
        cache_function=_never_cache,
    )
    crew_tool._calls = _Calls(executor, view, as_context(context), llm_name)
    return crew_tool


def to_crewai_tools(
    refs: Iterable[str | ToolDef | Mapping[str, Any] | tuple[str | ToolDef, Mapping[str, Any] | None]],
    registry: ToolRegistry,
    executor: ToolExecutor,
    context: ToolContext | Mapping[str, Any] | None = None,
    *,
    search: bool = False,
) -> list[BaseTool]:
    """CrewAI tools for the tools `refs` name (ids, names, `ToolDef`s, bindings or `(tool, binding)`), in order.

    Disabled bindings and disabled tools are left out; names are unique (a clash after CrewAI's name
    sanitizing gets a `_2` suffix), and each tool's `tool_id` maps it back to the catalogue.

    With `search`, two tools follow: `search_tools` (`search_tools_tool`), and `call_tool`, which calls
    a tool that search found, by name, through the executor. The agent then finds and uses tools on demand
    out of a catalogue of thousands while its prompt lists only a handful.

    Raises:
        ToolNotFoundError: a ref names no tool.
        ValueError: a binding fixes a parameter its tool does not have.
    """
    ctx = as_context(context)
    tools: list[ExecutorCrewTool] = []
    taken: set[str] = set()
    for tool, binding in resolve_bindings(refs, registry):
        base = sanitize_tool_name(tool.llm_name) or "tool"
        llm_name, counter = base, 2
        while llm_name in taken:
            llm_name, counter = sanitize_tool_name(f"{base}_{counter}"), counter + 1
        taken.add(llm_name)
        tools.append(to_crewai_tool(tool, executor, ctx, binding=binding, name=llm_name))
    if search:
        tools.extend(_search_binding(registry, executor, ctx))
    return tools


# -- tools found on demand -------------------------------------------------------------------------------


class _SearchCalls(_Calls):
    """The `search_tools` binding: remembers what each search found, which `call_tool` may then call."""

    __slots__ = ("found",)
    found: set[str]

    def observation(self, result: ToolResult) -> str | ToolFailure:
        if result.success and isinstance(result.output, list):
            self.found.update(
                str(i["tool_id"]) for i in result.output if isinstance(i, dict) and "tool_id" in i
            )
        return super().observation(result)


class _CallToolArgs(BaseModel):
    tool_name: str = Field(description="the name of a tool that search_tools found")
    arguments: dict[str, Any] = Field(default_factory=dict, description="its arguments, a JSON object")


class _FoundToolCaller(BaseTool):
    name: str = "call_tool"
    description: str = "Call a tool that search_tools found: give its name and its arguments."
    args_schema: type[BaseModel] = _CallToolArgs
    _search: _SearchCalls = PrivateAttr()
    _registry: Any = PrivateAttr()

    def _run(self, tool_name: str, arguments: dict[str, Any] | None = None) -> str | ToolFailure:
        tool = self._registry.resolve(tool_name)
        if tool is None or tool.tool_id not in self._search.found:
            return ToolFailure(
                message=f"Tool {tool_name!r} was not found by search_tools; search for what you need first.",
                reason=ToolFailureReason.INVALID_INPUT,
            )
        search = self._search
        return _Calls(search.executor, ToolView(tool), search.context, tool.llm_name).run(
            dict(arguments or {})
        )


def _search_binding(registry: ToolRegistry, executor: ToolExecutor, context: ToolContext) -> list[BaseTool]:
    from echo_tools.tool_search import search_tools_tool

    found = registry.get("tool_search_tools") or search_tools_tool(registry)
    search_tool = to_crewai_tool(found, executor, context)
    calls = _SearchCalls(executor, ToolView(found), context, search_tool.name)
    calls.found = set()
    search_tool._calls = calls
    caller = _FoundToolCaller()
    caller._search, caller._registry = calls, registry
    return [search_tool, caller]
