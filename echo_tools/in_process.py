"""Tools made of live Python objects, for `ToolRegistry.add`: functions, closures, bound methods, `@tool`
functions and LangChain / CrewAI tool instances.

The host that runs the code already trusts it, so no module allow-list applies; in exchange the tool
lives only as long as the object: it is `ephemeral` (never written to the store) and its `source` is
`python`. The `local` backend calls the object held here instead of importing a module.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Callable
from typing import Any

from echo_tools.errors import ToolExecutionError, ToolRegistrationError
from echo_tools.ingest import function_schema, instance_schema, parse_docstring
from echo_tools.models import ToolDef, ToolSource, ToolType

ACCEPTED = (
    "a function or closure, a bound method, an @tool function, "
    "a LangChain BaseTool instance or a CrewAI BaseTool instance"
)


@dataclasses.dataclass(frozen=True)
class InProcessTool:
    """An added tool's definition and the callable the `local` backend runs for it."""

    tool: ToolDef
    fn: Callable[..., Any]
    style: str  # "kwargs": fn(**args); "dict": fn(args)
    is_async: bool


def in_process_tool(obj: Any, **fields: Any) -> InProcessTool:
    """The definition and callable for `obj` (see `ToolRegistry.add`); `fields` override `ToolDef` fields.

    Raises:
        ToolRegistrationError: `obj` cannot be a tool (the error names what it got and what is accepted).
    """
    framework = _framework_of(obj)
    if framework is not None:
        return _from_framework_tool(obj, framework, fields)
    if inspect.iscoroutine(obj):
        obj.close()  # never awaited: closing it spares the "never awaited" warning
        raise _refusal(
            obj, "a coroutine object: pass the async function itself, not the result of calling it"
        )
    if isinstance(obj, type):
        raise _refusal(obj, f"the class {obj.__qualname__}: pass an instance's method, or a function")
    if not (inspect.isfunction(obj) or inspect.ismethod(obj)):
        raise _refusal(obj, f"a {type(obj).__name__} object")
    return _from_function(obj, fields)


def _refusal(obj: Any, what: str) -> ToolRegistrationError:
    return ToolRegistrationError(
        f"registry.add() got {what} ({obj!r:.80}); it accepts {ACCEPTED}", field="obj"
    )


def _from_function(fn: Callable[..., Any], fields: dict[str, Any]) -> InProcessTool:
    signature = inspect.signature(fn)
    variadic = [p.name for p in signature.parameters.values() if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    label = getattr(fn, "__qualname__", repr(fn))
    if variadic:
        raise _refusal(
            fn,
            f"{label} taking *{variadic[0]}: a tool's arguments need names and types, "
            "so give it named parameters",
        )
    declared: ToolDef | None = getattr(fn, "tool_def", None)  # an `@tool` function
    if isinstance(declared, ToolDef):
        data = declared.model_dump(exclude={"tool_id", "execution_config"}, exclude_defaults=True)
        data["tool_id"] = declared.tool_id
    else:
        name = fn.__name__
        if name == "<lambda>" and "name" not in fields:
            raise _refusal(fn, "a lambda without a name: pass name='...' too")
        summary, arg_docs = parse_docstring(fn.__doc__)
        data = {"name": name, "description": summary, "input_schema": function_schema(fn, arg_docs)}
    data.update(fields)
    tool = _definition(data, label, "function")
    is_async = inspect.iscoroutinefunction(fn)
    return InProcessTool(tool, fn, "kwargs", is_async)


def _definition(data: dict[str, Any], label: str, kind: str) -> ToolDef:
    data["tags"] = [*data.get("tags", ()), "ephemeral"]
    data.update(
        tool_type=ToolType.LOCAL,
        source=ToolSource.PYTHON,
        ephemeral=True,
        execution_config={"in_process": kind, "target": label[:200]},
    )
    try:
        return ToolDef.model_validate(data)
    except ValueError as exc:  # pydantic's ValidationError: a bad name or field override
        raise ToolRegistrationError(f"registry.add() cannot make a tool of {label}: {exc}") from exc


def _framework_of(obj: Any) -> str | None:
    """ "langchain" or "crewai" when `obj` is that framework's `BaseTool` (never imports a framework)."""
    for framework, module in (("langchain", "langchain_core.tools"), ("crewai", "crewai.tools")):
        loaded = sys.modules.get(module)
        base = getattr(loaded, "BaseTool", None)
        if isinstance(base, type) and isinstance(obj, base):
            return framework
    return None


def _from_framework_tool(obj: Any, framework: str, fields: dict[str, Any]) -> InProcessTool:
    if isinstance(obj, type):
        raise _refusal(obj, f"the class {obj.__qualname__}: pass an instance")
    label = f"{framework} tool {obj.name!r}"
    data: dict[str, Any] = {
        "name": obj.name,
        "description": obj.description or "",
        "input_schema": instance_schema(obj),
        "tags": [framework],
    }
    data.update(fields)
    tool = _definition(data, label, framework)
    run = _langchain_call(obj, tool) if framework == "langchain" else _crewai_call(obj, tool)
    return InProcessTool(tool, run, "dict", inspect.iscoroutinefunction(run))


def _langchain_call(instance: Any, tool: ToolDef) -> Callable[..., Any]:
    def content(result: Any) -> Any:
        from langchain_core.messages import BaseMessage

        return result.content if isinstance(result, BaseMessage) else result

    if getattr(instance, "coroutine", None) is not None:

        async def arun(args: dict[str, Any]) -> Any:
            return content(await instance.ainvoke(args))

        return arun

    def run(args: dict[str, Any]) -> Any:
        return content(instance.invoke(args))

    return run


def _crewai_call(instance: Any, tool: ToolDef) -> Callable[..., Any]:
    def run(args: dict[str, Any]) -> Any:
        from crewai.tools.tool_failure import ToolFailure

        result = instance.run(**args)
        if isinstance(result, ToolFailure):  # CrewAI reports some failures (usage limits) as values
            raise ToolExecutionError(f"Tool {tool.tool_id!r}: {result.message}", tool_id=tool.tool_id)
        return result

    return run
