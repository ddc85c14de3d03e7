"""Bring existing tools into the catalogue: Python functions, LangChain tools and CrewAI tools as `ToolDef`s.

A function becomes a `local` tool (`{module, function}`): its type hints and Google-style docstring give
the input schema. A LangChain or CrewAI tool becomes a `langchain` / `crewai` tool (`{module, class}` or
`{module, factory}`) that the executor rebuilds and calls. The registry only accepts targets inside its
`allowed_modules`, so define ingested tools in a package listed there, or hand the object itself to
`ToolRegistry.add` (an in-process tool, see `echo_tools.in_process`). Frameworks are imported lazily.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from echo_tools.models import ToolDef, ToolType

__all__ = ["tool", "tool_from_crewai", "tool_from_function", "tool_from_langchain"]

F = TypeVar("F", bound=Callable[..., Any])


class _Registrar(Protocol):
    """What `@tool(registry=...)` needs of a registry (a `ToolRegistry` is one)."""

    def register(self, tool: ToolDef) -> dict[str, str]: ...


_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?|Attributes):\s*$"
)
_ARG_LINE = re.compile(r"^\*{0,2}(?P<name>[A-Za-z_][A-Za-z0-9_]*)\s*(\([^)]*\))?\s*:\s*(?P<text>.*)$")
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """`(summary, {arg: description})` from a Google-style docstring (`Args:` section)."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    args: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in lines:
        header = _SECTION.match(line.strip()) if not line.startswith((" ", "\t")) else None
        if header:
            section, current = header.group(1), None
            continue
        if section is None:
            summary.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            match = _ARG_LINE.match(line.strip())
            indent = len(line) - len(line.lstrip())
            if match and (current is None or indent <= _arg_indent(lines, section)):
                current = match.group("name")
                args[current] = match.group("text").strip()
            elif current is not None:
                args[current] = f"{args[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), args


def _arg_indent(lines: list[str], section: str) -> int:
    # the indentation of the first entry under the section header: deeper lines continue an entry
    seen = False
    for line in lines:
        if line.strip() == f"{section}:":
            seen = True
        elif seen and line.strip():
            return len(line) - len(line.lstrip())
    return 0


def _strip_titles(node: Any) -> Any:
    """pydantic's generated `title`s only repeat the field names; the LLM reads descriptions instead."""
    if isinstance(node, dict):
        props = node.get("properties")
        out = {k: _strip_titles(v) for k, v in node.items() if k != "title" or not isinstance(v, str)}
        if isinstance(props, dict):  # a property literally named "title" stays
            out["properties"] = {k: _strip_titles(v) for k, v in props.items()}
        return out
    if isinstance(node, list):
        return [_strip_titles(v) for v in node]
    return node


def function_schema(fn: Callable[..., Any], descriptions: dict[str, str] | None = None) -> dict[str, Any]:
    """The JSON Schema of `fn`'s keyword arguments, from its type hints, defaults and arg descriptions."""
    from pydantic import ConfigDict, Field, create_model

    hints = typing.get_type_hints(fn, include_extras=True)
    descriptions = descriptions or {}
    fields: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name in ("self", "cls"):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (annotation, Field(default, description=descriptions.get(param.name)))
    model = create_model(f"{fn.__name__}_input", __config__=ConfigDict(extra="forbid"), **fields)
    schema = _strip_titles(model.model_json_schema())
    schema.setdefault("properties", {})
    if not fields:
        schema.pop("additionalProperties", None)  # a function without parameters takes anything
    return typing.cast("dict[str, Any]", schema)


def tool_from_function(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    tool_id: str | None = None,
    description: str | None = None,
    tags: Iterable[str] = (),
    **fields: Any,
) -> ToolDef:
    """A `local` tool running `fn`: `{module: fn.__module__, function: fn.__name__}`.

    Args:
        fn: a module-level function (sync or async). Its module must be inside the registry's
            `allowed_modules` for `registry.register` to accept the tool.
        name: display name (default: the function name).
        tool_id: catalogue id (default: `tool_<slug of name>`).
        description: what the LLM reads (default: the docstring's summary).
        tags: catalogue tags.
        **fields: any other `ToolDef` field (`timeout_ms`, `side_effect`, `permissions`, `output_schema`...).

    Raises:
        ValueError: `fn` is not a module-level function (a method, a lambda, a nested function).
    """
    qualname = getattr(fn, "__qualname__", "")
    if not inspect.isfunction(fn) or "." in qualname or qualname != fn.__name__ or fn.__name__ == "<lambda>":
        raise ValueError(
            f"tool_from_function needs a module-level function, got {qualname or fn!r}: the executor imports "
            "it as module.function, so methods, lambdas and nested functions cannot be registered"
        )
    summary, arg_docs = parse_docstring(fn.__doc__)
    return ToolDef(
        tool_id=tool_id or "",
        name=name or fn.__name__,
        description=description or summary,
        tool_type=ToolType.LOCAL,
        input_schema=function_schema(fn, arg_docs),
        execution_config={"module": fn.__module__, "function": fn.__name__},
        tags=list(tags),
        **fields,
    )


def tool(fn: F | None = None, *, registry: _Registrar | None = None, **options: Any) -> F | Callable[[F], F]:
    """Decorator: build the function's `ToolDef`, attach it as `fn.tool_def`, register it when asked.

    `@tool` and `@tool(registry=reg, name="Adder", side_effect="pure")` both work; the function itself is
    returned unchanged. Options are `tool_from_function`'s keyword arguments.
    """

    def decorate(func: F) -> F:
        definition = tool_from_function(func, **options)
        func.tool_def = definition  # type: ignore[attr-defined]
        if registry is not None:
            registry.register(definition)
        return func

    return decorate(fn) if fn is not None else decorate


def _framework_tool(
    obj: Any, base: Any, tool_type: ToolType, framework: str, overrides: dict[str, Any]
) -> ToolDef:
    if isinstance(obj, type):
        if not issubclass(obj, base):
            raise TypeError(f"{obj.__qualname__} is not a {framework} BaseTool subclass")
        instance: Any = obj()
        config = {"module": obj.__module__, "class": obj.__qualname__}
    elif isinstance(obj, base):
        cls = type(obj)
        if cls.__module__.split(".")[0] in ("langchain_core", "langchain", "crewai", "crewai_tools"):
            raise ValueError(
                f"{obj.name!r} is a {cls.__name__} built with constructor arguments, which the executor "
                f"cannot rebuild; pass a module-level factory function returning it instead"
            )
        instance, config = obj, {"module": cls.__module__, "class": cls.__qualname__}
    elif inspect.isfunction(obj) and "." not in obj.__qualname__:
        instance, config = obj(), {"module": obj.__module__, "factory": obj.__name__}
        if not isinstance(instance, base):
            raise TypeError(
                f"factory {obj.__qualname__}() returned {type(instance).__name__}, not a {framework} tool"
            )
    else:
        raise TypeError(f"Expected a {framework} BaseTool, its class or a factory function, got {obj!r:.100}")
    if "." in config.get("class", ""):
        raise ValueError(f"{config['class']} is a nested class; define the tool class at module level")
    input_schema = instance_schema(instance)
    return ToolDef(
        tool_id=overrides.pop("tool_id", None) or "",
        name=overrides.pop("name", None) or instance.name,
        description=overrides.pop("description", None) or instance.description or "",
        tool_type=tool_type,
        input_schema=input_schema,
        execution_config=config,
        **overrides,
    )


def instance_schema(instance: Any) -> dict[str, Any]:
    """The input JSON Schema of a LangChain or CrewAI tool object, from its `args_schema`."""
    schema = getattr(instance, "args_schema", None)
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        input_schema = _strip_titles(schema.model_json_schema())
    elif isinstance(schema, dict):
        input_schema = dict(schema)
    else:
        input_schema = dict(_EMPTY_SCHEMA)
    input_schema.setdefault("type", "object")
    input_schema.setdefault("properties", {})
    return input_schema


def tool_from_langchain(tool_or_class: Any, **overrides: Any) -> ToolDef:
    """A `langchain` tool from a LangChain `BaseTool` subclass, instance or factory function.

    The executor rebuilds it as `module.Class()` (or `module.factory()`), so the class must construct
    without arguments; a `StructuredTool` made by `@tool` needs a factory. The schema comes from its
    `args_schema`. Keyword arguments override `ToolDef` fields (`name`, `tool_id`, `tags`...).
    """
    from langchain_core.tools import BaseTool

    return _framework_tool(tool_or_class, BaseTool, ToolType.LANGCHAIN, "LangChain", overrides)


def tool_from_crewai(tool_or_class: Any, **overrides: Any) -> ToolDef:
    """A tool from a CrewAI `BaseTool` subclass, instance or factory function (see `tool_from_langchain`),
    or a function decorated with CrewAI's own `@tool`.

    A `@tool` function becomes a `local` tool running the function itself (`{module, function}`, tagged
    `crewai`): its name and description are the decorator's, its schema the function's signature. Other
    forms become `crewai` tools that the executor rebuilds.
    """
    from crewai.tools import BaseTool

    decorated = _crewai_decorated_function(tool_or_class, BaseTool)
    if decorated is not None:
        return _tool_from_decorated(tool_or_class, decorated, overrides)
    return _framework_tool(tool_or_class, BaseTool, ToolType.CREWAI, "CrewAI", overrides)


def _crewai_decorated_function(obj: Any, base: type) -> Any:
    """The function behind a CrewAI `@tool` object (a `Tool` holding it as `.func`), else None."""
    func = getattr(obj, "func", None)
    if isinstance(obj, base) and type(obj).__module__.startswith("crewai") and inspect.isfunction(func):
        return func
    return None


def _tool_from_decorated(obj: Any, func: Callable[..., Any], overrides: dict[str, Any]) -> ToolDef:
    import sys

    module = sys.modules.get(func.__module__)
    found = getattr(module, func.__name__, None) if module is not None else None
    if found is not obj and found is not func:
        raise ValueError(
            f"CrewAI tool {obj.name!r}: its function {func.__module__}.{func.__qualname__} is not reachable "
            f"under that name in its module (found {type(found).__name__}); decorate a module-level "
            "function with @tool, or pass a BaseTool subclass"
        )
    overrides.setdefault("name", obj.name)
    overrides.setdefault("description", obj.description or None)
    overrides["tags"] = [*overrides.get("tags", ()), "crewai"]
    return tool_from_function(func, **overrides)
