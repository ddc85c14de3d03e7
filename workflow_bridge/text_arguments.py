"""Tool arguments read from a task text, for nodes and models that have no other source of them: the
`HEADER:` sections of the adapter's task text, embedded JSON objects, the first fenced code block, and
`build_arguments` (each schema property from a JSON object, its default, the code block, or a plain value
taken from the request). The MCP node uses it for its tool's arguments, the rehearsal model for every call.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SECTION = re.compile(r"^(?:Current Task:[ \t]*)?([A-Z][A-Z ()/_-]{2,}):[ \t]*$", re.M)
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_CODE_NAMES = {"code", "source", "source_code", "script", "snippet", "program"}
_MAX_OBJECT_SCANS = 200


def sections(text: str) -> dict[str, str]:
    """The `HEADER:` sections of a task text built by the adapter (`ORIGINAL USER REQUEST`, ...)."""
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        found.setdefault(match.group(1).strip(), text[match.end() : end].strip())
    return found


def user_request_in(text: str) -> str:
    """The user's request inside a task text (its ORIGINAL USER REQUEST section, else the whole text)."""
    found = sections(text)
    return found.get("ORIGINAL USER REQUEST") or found.get("CURRENT TASK") or text.strip()


def json_objects_in(text: str) -> list[dict[str, Any]]:
    """Every JSON object embedded in `text`, in order (bounded scan)."""
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    i, scans = text.find("{"), 0
    while i != -1 and scans < _MAX_OBJECT_SCANS:
        scans += 1
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            objects.append(value)
        i = text.find("{", end)
    return objects


def code_block_in(text: str) -> str | None:
    """The body of the first fenced code block in `text`."""
    match = _FENCE.search(text)
    return match.group(2).strip("\n") if match else None


def _unwrap(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    # CrewAI's strict schemas express optional fields as anyOf [T, null]
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list):
            real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            nullable = len(real) < len(options)
            if len(real) == 1:
                merged = {**{k: v for k, v in prop.items() if k != key}, **real[0]}
                return merged, nullable
            return prop, nullable
    types = prop.get("type")
    if isinstance(types, list):
        real_types = [t for t in types if t != "null"]
        return {**prop, "type": real_types[0] if real_types else None}, len(real_types) < len(types)
    return prop, False


def build_arguments(schema: dict[str, Any], task_text: str) -> dict[str, Any]:
    """Arguments for one tool call, taken from the task text and the tool's JSON Schema."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    request = user_request_in(task_text)
    objects = [o for o in json_objects_in(task_text) if set(o) & set(props)]
    code = code_block_in(request) or code_block_in(task_text)
    args: dict[str, Any] = {}
    for name, raw in props.items():
        prop, nullable = _unwrap(raw if isinstance(raw, dict) else {})
        from_json = next((o[name] for o in objects if name in o), _MISSING)
        if from_json is not _MISSING:
            args[name] = from_json
        elif "default" in prop and prop["default"] is not None:
            args[name] = prop["default"]
        elif _is_code_param(name, prop) and code is not None:
            args[name] = code
        elif prop.get("enum"):
            args[name] = prop["enum"][0]
        elif nullable or name not in required:
            continue
        else:
            args[name] = _value_for(name, prop, request, code)
    return args


_MISSING = object()


def _is_code_param(name: str, prop: dict[str, Any]) -> bool:
    lowered = name.lower()
    # `test_code` and the like hold tests, not the code under test: the fenced block is the code itself
    if lowered.startswith("test"):
        return False
    return prop.get("type") in (None, "string") and (lowered in _CODE_NAMES or "code" in lowered)


def _value_for(name: str, prop: dict[str, Any], request: str, code: str | None) -> Any:
    kind = prop.get("type")
    if kind == "integer":
        return int(prop.get("minimum", 1))
    if kind == "number":
        return float(prop.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        items, _ = _unwrap(prop.get("items") or {})
        if items.get("type") in ("number", "integer"):
            numbers = [float(n) for n in _NUMBER.findall(_prose(request))]
            return [int(n) for n in numbers] if items.get("type") == "integer" else numbers
        return [request] if items.get("type") == "string" else []
    if kind == "object":
        return {}
    if _is_code_param(name, prop) and code is None:
        return request
    return request


def _prose(text: str) -> str:
    """`text` without its code blocks and JSON objects (numbers there are not the user's operands)."""
    text = _FENCE.sub(" ", text)
    for obj in json_objects_in(text):
        text = text.replace(json.dumps(obj), " ")
    return re.sub(r"\{[^{}]*\}", " ", text)
