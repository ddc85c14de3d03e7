"""The json_tools tool: parse JSON text, query it with JSONPath, validate it against a JSON Schema, format it."""

from __future__ import annotations

import json
from typing import Any

from AgentTools.json_tools.jsonpath import query
from echo_tools.errors import ToolRegistrationError
from echo_tools.schema import SchemaValidator, check_schema

OPERATIONS = ("parse", "query", "validate", "format", "minify", "keys")
MAX_TEXT_CHARS = 5_000_000
MAX_ERRORS = 20


def _load(text: str, field: str = "text") -> Any:
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"{field} is {len(text)} characters long; at most {MAX_TEXT_CHARS} are allowed")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{field} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc


def _type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )


class JsonToolsService:
    """JSON utilities for agents."""

    def run(
        self,
        operation: str,
        data: Any = None,
        text: str | None = None,
        path: str | None = None,
        schema: dict[str, Any] | None = None,
        indent: int = 2,
        sort_keys: bool = False,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Run one operation on `data` (a JSON value) or `text` (JSON source).

        Raises:
            ValueError: an unknown operation, text that is not JSON, a bad path or schema.
        """
        if operation not in OPERATIONS:
            raise ValueError(f"operation {operation!r} is unknown; expected one of: {', '.join(OPERATIONS)}")
        if text is not None:
            value = _load(text)
        elif data is not None or operation == "validate":
            value = data
        else:
            raise ValueError(f"operation {operation!r} needs data (a JSON value) or text (JSON source)")
        if operation == "parse":
            return {"operation": operation, "result": value, "type": _type(value)}
        if operation == "query":
            if not path:
                raise ValueError("operation 'query' needs path, e.g. '$.items[?(@.price < 10)].name'")
            matches = query(value, path)
            return {"operation": operation, "result": matches, "count": len(matches), "path": path}
        if operation == "validate":
            if not isinstance(schema, dict):
                raise ValueError(
                    f"operation 'validate' needs schema (a JSON Schema object), got {schema!r:.60}"
                )
            try:
                check_schema(schema, field="schema")
            except ToolRegistrationError as exc:
                raise ValueError(exc.message) from exc
            errors = SchemaValidator(schema, prefix="data").errors(value)
            return {
                "operation": operation,
                "result": not errors,
                "valid": not errors,
                "errors": errors[:MAX_ERRORS],
            }
        if operation == "keys":
            if not isinstance(value, dict):
                raise ValueError(f"operation 'keys' needs an object, got {_type(value)}")
            return {"operation": operation, "result": list(value), "count": len(value)}
        if not 0 <= indent <= 8:
            raise ValueError(f"indent must be between 0 and 8, got {indent!r}")
        if operation == "minify":
            rendered = json.dumps(value, separators=(",", ":"), sort_keys=sort_keys, ensure_ascii=False)
        else:
            rendered = json.dumps(value, indent=indent, sort_keys=sort_keys, ensure_ascii=False)
        return {"operation": operation, "result": rendered, "characters": len(rendered)}
