"""What both framework adapters share: the tool as an LLM sees it, and the call as the executor sees it.

A `ToolView` applies a canvas binding (fixed parameters hidden from the LLM and merged into every call, a
description override) to a `ToolDef`; it builds the pydantic `args_schema` CrewAI needs from the JSON Schema,
strips the `None`s LLMs send for optional fields. The text the LLM reads of a result: `echo_tools.llm_text`.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, create_model

from echo_tools.errors import ToolNotFoundError
from echo_tools.models import ToolContext, ToolDef, ToolStatus
from echo_tools.schema import allows_null

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry


class UnsetAwareArgs(BaseModel):
    """Base of generated `args_schema` models: dumps only the fields the caller set.

    CrewAI dumps validated arguments with `model_dump()`, which would fill every unset optional field with
    `None`; here unset fields stay absent. `model_json_schema()` returns the tool's own JSON Schema (optional
    fields made nullable for CrewAI's strict function-calling schema) instead of pydantic's lossy rendering.
    """

    model_config = ConfigDict(extra="forbid")
    echo_json_schema: ClassVar[dict[str, Any] | None] = None

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("exclude_unset", True)
        return super().model_dump(**kwargs)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        own = cls.__dict__.get("echo_json_schema")
        if own is not None:
            return copy.deepcopy(own)
        return super().model_json_schema(*args, **kwargs)


class _OpenArgs(UnsetAwareArgs):
    """Base of the field-less model for schemas CrewAI cannot convert: it must not refuse any argument."""

    model_config = ConfigDict(extra="allow")


def _walk_children(node: dict[str, Any], fn: Any) -> dict[str, Any]:
    out = dict(node)
    for key in ("items", "additionalProperties", "not"):
        if isinstance(out.get(key), dict):
            out[key] = fn(out[key])
    if isinstance(out.get("items"), list):
        out["items"] = [fn(p) if isinstance(p, dict) else p for p in out["items"]]
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(out.get(key), list):
            out[key] = [fn(p) if isinstance(p, dict) else p for p in out[key]]
    for key in ("$defs", "definitions"):
        if isinstance(out.get(key), dict):
            out[key] = {k: fn(v) if isinstance(v, dict) else v for k, v in out[key].items()}
    return out


def nullable_optionals(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy of `schema` where every optional property also accepts `null`, at every depth.

    CrewAI's native function calling sends a strict schema in which every property is required; making
    optional ones nullable lets the model say "not given" (`null`), which `drop_nulls` then removes.
    """
    out = _walk_children(schema, nullable_optionals)
    props = out.get("properties")
    if isinstance(props, dict):
        required = set(out.get("required") or ())
        new_props: dict[str, Any] = {}
        for key, prop in props.items():
            prop = nullable_optionals(prop) if isinstance(prop, dict) else prop
            if (
                key not in required
                and isinstance(prop, dict)
                and not allows_null(prop, untyped_objects_nullable=False)
            ):
                outer = {k: prop[k] for k in ("description", "default", "title") if k in prop}
                inner = {k: v for k, v in prop.items() if k not in outer}
                prop = {"anyOf": [inner, {"type": "null"}], **outer}
            new_props[key] = prop
        out["properties"] = new_props
    return out


def drop_nulls(schema: Any, data: Any, root: dict[str, Any] | None = None) -> Any:
    """Remove `None` values of optional, non-nullable properties from `data`, at every depth.

    LLMs (and CrewAI's strict schemas) send `null` for optional fields they leave out; a tool must see
    those fields as absent. Required fields and fields whose schema allows `null` keep their `None`.
    """
    if not isinstance(schema, dict):
        return data
    root = schema if root is None else root
    ref = schema.get("$ref")
    if isinstance(ref, str):
        schema = _resolve_local_ref(root, ref) or schema
    if isinstance(data, dict):
        props = schema.get("properties")
        if not isinstance(props, dict):
            return data
        required = schema.get("required") or ()
        out = {}
        for key, value in data.items():
            prop = props.get(key)
            if (
                value is None
                and key not in required
                and not allows_null(prop, untyped_objects_nullable=False)
            ):
                continue
            out[key] = drop_nulls(prop, value, root) if isinstance(value, (dict, list)) else value
        return out
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [drop_nulls(schema["items"], v, root) if isinstance(v, (dict, list)) else v for v in data]
    return data


def _resolve_local_ref(root: dict[str, Any], ref: str) -> dict[str, Any] | None:
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node if isinstance(node, dict) else None


def args_model(model_name: str, schema: dict[str, Any], llm_schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model for CrewAI's `args_schema`: fields from `schema`, JSON Schema from `llm_schema`.

    CrewAI's own converter builds the fields (nested models, lists, `Literal` enums, defaults and
    descriptions); a schema it cannot convert (exotic keywords, field names pydantic refuses) still gets a
    model, without fields, whose JSON Schema is the tool's. Validation stays with the executor either way.
    """
    from crewai.utilities.pydantic_schema_utils import create_model_from_schema

    try:
        model = create_model_from_schema(schema, model_name=model_name, __base__=UnsetAwareArgs)
    except Exception:  # boundary: CrewAI's converter rejects some valid schemas; present them as they are
        model = create_model(model_name, __base__=_OpenArgs)
    model.echo_json_schema = llm_schema  # type: ignore[attr-defined]
    return model


class ToolView:
    """One tool as bound to one agent: name, description and schema the LLM sees, and how calls are made.

    Args:
        tool: the catalogue entry.
        binding: the canvas binding `{"tool_id", "enabled", "fixed": {param: value}, "description"}`;
            fixed parameters are removed from the schema the LLM sees and merged into every call.

    Raises:
        ValueError: a fixed parameter is not a property of the tool's input schema.
    """

    __slots__ = ("description", "fixed", "input_schema", "name", "tool")

    def __init__(self, tool: ToolDef, binding: Mapping[str, Any] | None = None) -> None:
        binding = binding or {}
        self.tool = tool
        self.name = tool.llm_name
        fixed = binding.get("fixed") or {}
        if not isinstance(fixed, Mapping):
            raise ValueError(
                f"Binding of tool {tool.tool_id!r}: 'fixed' must map parameter names to values, got {fixed!r}"
            )
        self.fixed = dict(fixed)
        schema = tool.input_schema or {"type": "object", "properties": {}}
        props = schema.get("properties")
        if isinstance(props, dict):
            unknown = [key for key in self.fixed if key not in props]
            if unknown:
                raise ValueError(
                    f"Binding of tool {tool.tool_id!r}: fixed parameter {unknown[0]!r} is not one of its "
                    f"parameters {sorted(props)!r}"
                )
        self.input_schema = _without(schema, self.fixed) if self.fixed else schema
        override = binding.get("description")
        self.description = (override if isinstance(override, str) and override.strip() else None) or (
            tool.description or f"Run the tool {tool.name!r}."
        )

    def call_args(self, llm_args: Mapping[str, Any] | None) -> dict[str, Any]:
        """The executor's input: the LLM's arguments without null junk, with the fixed parameters merged."""
        args = dict(llm_args or {})
        for value in args.values():
            if value is None or isinstance(value, (dict, list)):  # only then can a null hide anywhere
                args = drop_nulls(self.input_schema, args)
                break
        if self.fixed:
            args.update(self.fixed)
        return args


def _without(schema: dict[str, Any], fixed: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(schema)
    out["properties"] = {k: v for k, v in schema["properties"].items() if k not in fixed}
    if isinstance(schema.get("required"), list):
        out["required"] = [k for k in schema["required"] if k not in fixed]
    return out


def as_context(context: ToolContext | Mapping[str, Any] | None) -> ToolContext:
    """A `ToolContext` from a context, a dict of its fields, or nothing."""
    if context is None:
        return ToolContext()
    if isinstance(context, ToolContext):
        return context
    return ToolContext.model_validate(dict(context))


def resolve_bindings(
    refs: Iterable[Any], registry: ToolRegistry
) -> list[tuple[ToolDef, Mapping[str, Any] | None]]:
    """The tools `refs` name, each with its binding, in order.

    A ref is a tool id or name, a `ToolDef`, a canvas binding dict (`tool_id` plus `enabled`, `fixed`,
    `description`), or a `(tool, binding)` pair (for bindings keyed elsewhere, without their own
    `tool_id`). Bindings with `enabled: false` and tools whose status is `disabled` are left out; a tool
    named twice is bound once (the first time).

    Raises:
        ToolNotFoundError: a ref names no tool in the registry.
    """
    out: list[tuple[ToolDef, Mapping[str, Any] | None]] = []
    seen: set[str] = set()
    for ref in refs:
        binding: Mapping[str, Any] | None = None
        if isinstance(ref, tuple) and len(ref) == 2:
            ref, binding = ref
            if binding is not None and binding.get("enabled", True) is False:
                continue
            tool = registry.require(ref)
        elif isinstance(ref, Mapping):
            binding = ref
            if binding.get("enabled", True) is False:
                continue
            target = binding.get("tool_id") or binding.get("name")
            if not isinstance(target, str) or not target:
                raise ToolNotFoundError(f"Tool binding {dict(binding)!r} names no tool_id", field="tool_id")
            tool = registry.require(target)
        else:
            tool = registry.require(ref)
        if tool.status is ToolStatus.DISABLED or tool.tool_id in seen:
            continue
        seen.add(tool.tool_id)
        out.append((tool, binding))
    return out
