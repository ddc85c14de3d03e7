"""JSON Schema handling: meta-checks at registration, compiled validators, argument normalising.

Validation runs on jsonschema-rs (about a hundred times faster than the `jsonschema` package for the small
object schemas tools have); the `jsonschema` package checks schemas against their meta-schema, where its
readable messages matter more than speed.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import jsonschema_rs

from echo_tools.errors import ToolRegistrationError
from echo_tools.redaction import contains_secret, is_secret_key
from echo_tools.suggest import explain_schema_error

Validator = Callable[[Any], "list[str]"]

_MAX_ERRORS = 5
# JSON containers nested in a schema (or any definition field), at most: real tool schemas stay under 20,
# and a deeper one exhausts recursion in the meta-check, the serialiser and the validator compiler
MAX_DEPTH = 64


def nesting_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deeply JSON containers nest in `value` (a scalar is 0); counted without recursion, and the
    count stops as soon as it passes `limit`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
            stack.extend((child, depth) for child in (item.values() if isinstance(item, dict) else item))
    return deepest


def check_depth(value: Any, *, field: str, tool_id: str | None = None) -> None:
    """Raise `ToolRegistrationError` naming `field` when `value` nests deeper than `MAX_DEPTH`."""
    depth = nesting_depth(value)
    if depth > MAX_DEPTH:
        who = f"Tool {tool_id!r}: " if tool_id else ""
        raise ToolRegistrationError(
            f"{who}{field} nests more than {MAX_DEPTH} levels deep (found {depth}+); flatten it or use $defs",
            tool_id=tool_id,
            field=field,
        )


def check_schema(schema: Any, *, field: str, tool_id: str | None = None) -> None:
    """Raise `ToolRegistrationError` unless `schema` is a valid JSON Schema (draft 2020-12 or as declared).

    Args:
        schema: the schema to check; `{}` (accept anything) is valid.
        field: the ToolDef field it came from, named in the error (`input_schema`, `output_schema`).
        tool_id: named in the error.
    """
    who = f"Tool {tool_id!r}: " if tool_id else ""
    if not isinstance(schema, dict):
        raise ToolRegistrationError(
            f"{who}{field} must be a JSON object (a JSON Schema), got {type(schema).__name__}: {schema!r:.80}",
            tool_id=tool_id,
            field=field,
        )
    check_depth(schema, field=field, tool_id=tool_id)
    if not _passes_meta_schema(schema):
        _name_meta_schema_error(schema, who, field, tool_id)
    try:
        _compile(schema)
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        # a bad regex or reference: the Python check names its path when the meta-schema's formats catch it
        _name_meta_schema_error(schema, who, field, tool_id)
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ToolRegistrationError(
            f"{who}{field} cannot be compiled: {first_line}", tool_id=tool_id, field=field
        ) from exc


def _passes_meta_schema(schema: dict[str, Any]) -> bool:
    """The meta-check, in Rust (about 2 us where the Python check takes a millisecond or more)."""
    try:
        return bool(jsonschema_rs.meta.is_valid(schema))
    except (ValueError, jsonschema_rs.ReferencingError):  # an unknown `$schema`: the Python check names it
        return False


def _name_meta_schema_error(schema: dict[str, Any], who: str, field: str, tool_id: str | None) -> None:
    """For a schema the fast meta-check refused: the Python check, whose error names the path and value
    the way the rest of our messages do (a schema it accepts goes on to compiling, as before)."""
    import jsonschema  # kept out of import time, and off the path of valid schemas

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(root)"
        raise ToolRegistrationError(
            f"{who}{field} is not a valid JSON Schema at {where}: {exc.message}", tool_id=tool_id, field=field
        ) from exc


def _compile(schema: dict[str, Any]) -> Any:
    # offline: a `$ref` to http:// or file:// must never make registration (or a call) fetch anything;
    # references inside the schema and the JSON Schema meta-schemas still resolve.
    return jsonschema_rs.validator_for(schema, offline=True)


def format_path(path: Any) -> str:
    """`['values', 2]` -> `values[2]`; the root is `(root)`."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(root)"


def _describe(error: Any, prefix: str, schema: Any = None) -> str:
    parts = list(error.instance_path)
    path = format_path(parts)
    if path == "(root)":
        where = prefix
    else:
        where = f"{prefix}{path}" if path.startswith("[") else f"{prefix}.{path}"
    if _holds_secret(parts, error.instance):
        # jsonschema's messages quote the bad value; under a secret-named key that is the secret itself
        keyword = str(list(error.schema_path)[-1]) if list(error.schema_path) else "schema"
        return f"{where}: the value fails the schema's {keyword!r} rule (value redacted: secret field)"
    return explain_schema_error(error, where, schema) or f"{where}: {error.message}"  # "did you mean"


def _holds_secret(path: list[Any], instance: Any) -> bool:
    if any(isinstance(part, str) and is_secret_key(part) for part in path):
        return True
    return isinstance(instance, (dict, list)) and contains_secret(instance)


class SchemaValidator:
    """A compiled validator for one schema; `errors(value)` returns readable messages, empty when valid."""

    __slots__ = ("_prefix", "_schema", "_validator", "accepts_anything")

    def __init__(self, schema: dict[str, Any], prefix: str = "input") -> None:
        self.accepts_anything = not schema
        self._validator = None if self.accepts_anything else _compile(schema)
        self._prefix = prefix
        self._schema = schema  # read only when a value fails, to suggest the field or value meant

    def __deepcopy__(self, memo: dict[int, Any]) -> SchemaValidator:
        # compiled validators are immutable and cannot be pickled; a deep copy of a ToolDef shares them
        return self

    def __copy__(self) -> SchemaValidator:
        return self

    def is_valid(self, value: Any) -> bool:
        """True when `value` satisfies the schema."""
        return self._validator is None or self._validator.is_valid(value)

    @property
    def check(self) -> Callable[[Any], bool] | None:
        """The compiled `is_valid` itself, for hot paths (None when the schema accepts anything)."""
        return None if self._validator is None else self._validator.is_valid

    def errors(self, value: Any) -> list[str]:
        """Up to five readable messages (`input.values[2]: "x" is not of type "number"`); empty when valid."""
        if self._validator is None or self._validator.is_valid(value):
            return []
        out = []
        for error in self._validator.iter_errors(value):
            out.append(_describe(error, self._prefix, self._schema))
            if len(out) >= _MAX_ERRORS:
                break
        return out


def compiled(tool: Any, kind: str) -> SchemaValidator:
    """The validator for `tool`'s `kind` schema (`input` or `output`), compiled once per ToolDef object.

    The registry hands out one ToolDef object per stored version, so this compiles once per tool version;
    a re-registered tool is a new object and gets fresh validators.

    Raises:
        ToolRegistrationError: the schema cannot be compiled (a stored file edited by hand).
    """
    # Keyed by the schema object too: `model_copy(update={"input_schema": ...})` and attribute assignment
    # carry the old cache along (pydantic copies private attributes), and must not get the old validator.
    cache: dict[str, tuple[Any, SchemaValidator]] = tool._validators
    schema = tool.input_schema if kind == "input" else tool.output_schema
    entry = cache.get(kind)
    if entry is not None and entry[0] is schema:
        return entry[1]
    try:
        found = SchemaValidator(schema, prefix=kind)
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        # stored files are not meta-checked at load (too slow for big folders); a hand-edited schema
        # that cannot compile surfaces here, as a refused definition rather than a crash
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: {kind}_schema cannot be compiled: {first_line}",
            tool_id=tool.tool_id,
            field=f"{kind}_schema",
        ) from exc
    cache[kind] = (schema, found)
    return found


def allows_null(prop: Any, *, untyped_objects_nullable: bool = True) -> bool:
    """True when the property schema accepts `null` (an empty or non-dict schema accepts anything).

    Args:
        prop: one property's schema.
        untyped_objects_nullable: how to read an untyped schema with `$ref` or `properties`. JSON Schema
            lets `null` through (the default, what the validator does); the framework adapters pass False
            because such a schema describes an object (or a definition not resolved here) and an LLM's
            `null` for it means "not given".
    """
    if not isinstance(prop, dict) or not prop:
        return True
    kind = prop.get("type")
    if kind is None:
        if "enum" in prop:
            return None in prop["enum"]
        if "const" in prop:
            return prop["const"] is None
        for key in ("anyOf", "oneOf"):
            if isinstance(prop.get(key), list):
                return any(
                    allows_null(p, untyped_objects_nullable=untyped_objects_nullable) for p in prop[key]
                )
        return untyped_objects_nullable or ("$ref" not in prop and "properties" not in prop)
    if isinstance(kind, list):
        return "null" in kind
    return bool(kind == "null")


_SCALAR_TYPE_NAMES = frozenset({"string", "number", "integer", "boolean", "null"})


def scalar_properties(schema: Any) -> frozenset[str]:
    """The top-level properties of `schema` whose `type` admits only scalars (text, numbers, booleans, null).

    A value that passed the schema holds no object or array under these keys, whatever else it holds.
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return frozenset()
    out = set()
    for key, prop in props.items():
        kind = prop.get("type") if isinstance(prop, dict) else None
        kinds = kind if isinstance(kind, list) else [kind]
        if kinds and all(isinstance(k, str) and k in _SCALAR_TYPE_NAMES for k in kinds):
            out.add(key)
    return frozenset(out)


def normalize_args(schema: dict[str, Any], data: Any) -> Any:
    """Drop `None` for optional keys whose schema does not allow null, and fill in `default`s.

    CrewAI and some LLMs send every optional field as `None`; a schema that types the field as `array`
    would reject the call. Returns a new dict; the caller's input is not changed. Non-dict input and
    schemas without `properties` pass through untouched.
    """
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(data, dict) or not isinstance(props, dict):
        return data
    required = schema.get("required") or ()
    out: dict[str, Any] = {}
    for key, value in data.items():
        if value is None and key not in required and not allows_null(props.get(key)):
            continue
        out[key] = value
    for key, prop in props.items():
        if key not in out and isinstance(prop, dict) and "default" in prop:
            out[key] = copy.deepcopy(prop["default"])
    return out
