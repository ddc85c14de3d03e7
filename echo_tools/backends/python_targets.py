"""A `local` tool's Python target: its module imported only inside the allowed modules, its instance, the
callable, and how that callable takes arguments (`CallPlan`: keywords, or the whole input as one dict or
pydantic model), decided once. Used by the `local` backend in this process and by its isolated child.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.backends.base import module_allowed
from echo_tools.errors import ToolConfigError

if TYPE_CHECKING:
    from echo_tools.models import ToolDef

# Unannotated single parameters with these names receive the whole input (EchoAI's tools use them).
WHOLE_INPUT_NAMES = frozenset({"data", "input", "input_data", "payload", "params", "args", "kwargs_dict"})


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """How to call one tool's callable, decided once."""

    tool: ToolDef  # the definition this plan was made for (a re-registered tool gets a new plan)
    fn: Callable[..., Any]
    is_async: bool
    style: str  # "kwargs", "dict" or "model"
    model: Any = None  # the pydantic model class for style "model"
    isolation: str = "thread"

    def arguments(self, args: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        if self.style == "kwargs":
            return (), args
        if self.style == "model":
            return (self.model(**args),), {}
        return (dict(args),), {}  # a copy: the tool may change it, the invoked event still holds args


def import_module_checked(tool: ToolDef, allowed_modules: typing.Sequence[str]) -> Any:
    """Import the module `tool.execution_config` names, after checking it is inside `allowed_modules`.

    Raises:
        ToolConfigError: there is no config, the module is outside `allowed_modules`, or it fails to import.
    """
    config = tool.execution_config
    if not config:
        raise ToolConfigError(
            f"Tool {tool.tool_id!r} has no execution_config (a catalogue entry only), so it cannot run; "
            "give it {module, function} or {module, class, method}",
            tool_id=tool.tool_id,
            field="execution_config",
        )
    module_name = config.get("module")
    if not isinstance(module_name, str) or not module_allowed(module_name, allowed_modules):
        # defence in depth: registration checked this, but a stored file may have been edited since
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: module {module_name!r} is outside the allowed modules "
            f"{list(allowed_modules)!r}",
            tool_id=tool.tool_id,
            field="execution_config.module",
        )
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # boundary: the tool's module may fail to import in any way
        hint = ""
        if isinstance(exc, ModuleNotFoundError) and exc.name == module_name.split(".")[0]:
            hint = (
                f"; is the folder holding {exc.name!r} on PYTHONPATH? (for the echo-tools command: "
                'PYTHONPATH="$PWD:$PYTHONPATH" echo-tools ...)'
            )
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: cannot import module {module_name!r}: {type(exc).__name__}: {exc}{hint}",
            tool_id=tool.tool_id,
            field="execution_config.module",
        ) from exc


def build_instance(tool: ToolDef, module: Any, allowed_modules: typing.Sequence[str] | None = None) -> Any:
    """`module.<class>()` or `module.<factory>()` from the tool's config; constructor errors named.

    With `allowed_modules`, the class or factory must also be defined inside them (see `check_origin`).
    """
    config = tool.execution_config
    kind = "class" if "class" in config else "factory"
    maker = _attribute(tool, module, config.get(kind), kind)
    if allowed_modules is not None:
        check_origin(tool, maker, kind, allowed_modules)
    try:
        return maker()
    except Exception as exc:  # boundary: the tool class's constructor is foreign code
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: cannot build {module.__name__}.{config.get(kind)}(): "
            f"{type(exc).__name__}: {exc}",
            tool_id=tool.tool_id,
            field=f"execution_config.{kind}",
        ) from exc


def import_target(tool: ToolDef, allowed_modules: typing.Sequence[str]) -> tuple[Any, Callable[..., Any]]:
    """Import the tool's module and return `(owner, callable)`; owner is the instance for a method.

    Raises:
        ToolConfigError: the module is outside `allowed_modules`, or the module, class or function is missing.
    """
    module = import_module_checked(tool, allowed_modules)
    config = tool.execution_config
    if "function" in config:
        fn = _decorated_function(_attribute(tool, module, config["function"], "function"))
        check_origin(tool, fn, "function", allowed_modules)
        return None, fn
    instance = build_instance(tool, module, allowed_modules)
    return instance, _attribute(tool, instance, config.get("method"), "method")


def _decorated_function(target: Any) -> Any:
    # CrewAI's `@tool` replaces the function by a (not callable) tool object keeping it as `.func`
    # (`tool_from_crewai` registers such tools as `{module, function}`); the origin check then applies
    # to that function itself.
    inner = getattr(target, "func", None)
    if not callable(target) and inspect.isfunction(inner):
        return inner
    return target


def check_origin(tool: ToolDef, target: Any, kind: str, allowed_modules: typing.Sequence[str]) -> None:
    """Refuse a class, factory or function that an allowed module merely imported from elsewhere.

    The module allow-list is about code: `{module: "AgentTools.x", function: "run"}` must not reach a
    `subprocess.run` or `shutil.rmtree` that `AgentTools.x` happens to import.
    """
    origin = getattr(target, "__module__", None)
    if not isinstance(origin, str) or not module_allowed(origin, allowed_modules):
        name = getattr(target, "__qualname__", None) or type(target).__name__
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: execution_config.{kind} names {origin}.{name}, which is defined outside "
            f"the allowed modules {list(allowed_modules)!r}; only code defined inside them can be a tool",
            tool_id=tool.tool_id,
            field=f"execution_config.{kind}",
        )


def _attribute(tool: ToolDef, owner: Any, name: Any, kind: str) -> Any:
    if not isinstance(name, str) or name.startswith("_") or not hasattr(owner, name):
        where = getattr(owner, "__name__", type(owner).__name__)
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: execution_config.{kind} {name!r} does not exist in {where!r}",
            tool_id=tool.tool_id,
            field=f"execution_config.{kind}",
        )
    return getattr(owner, name)


def plan_call(tool: ToolDef, fn: Callable[..., Any]) -> CallPlan:
    """Decide how `fn` takes the validated input: keyword args, or one dict / pydantic-model parameter."""
    isolation = str(tool.execution_config.get("isolation", "thread"))
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004
    style, model = "kwargs", None
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # builtins without a signature take keywords or fail loudly
        return CallPlan(tool, fn, is_async, style, None, isolation)
    params = [
        p
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    variadic = any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in signature.parameters.values())
    properties = tool.input_schema.get("properties") or {}
    if len(params) == 1 and not variadic and params[0].name not in properties:
        param = params[0]
        annotation = _resolved_annotation(fn, param)
        if _is_model(annotation):
            style, model = "model", annotation
        elif _is_mapping(annotation) or (
            annotation is inspect.Parameter.empty and param.name in WHOLE_INPUT_NAMES
        ):
            style = "dict"
    return CallPlan(tool, fn, is_async, style, model, isolation)


def _resolved_annotation(fn: Callable[..., Any], param: inspect.Parameter) -> Any:
    annotation = param.annotation
    if isinstance(annotation, str):  # `from __future__ import annotations` in the tool's module
        try:
            annotation = typing.get_type_hints(fn).get(param.name, annotation)
        except Exception:  # boundary: unresolvable forward references fall back to keyword args
            return inspect.Parameter.empty
    return annotation


def _is_model(annotation: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_mapping(annotation: Any) -> bool:
    origin = typing.get_origin(annotation) or annotation
    return isinstance(origin, type) and issubclass(origin, (dict, Mapping))
