"""What a model reads of a tool's result: one rendering for every adapter, bounded in size.

A successful output is its text (strings as they are, anything else as JSON); a failure is a sentence
naming the tool, the error and what to do next. Binary payloads (base64 runs, `data:` URIs, the `data` of
image, audio and blob content) never reach the model raw: each becomes a short note of what was left out.
The text is cut at the tool's `max_output_chars` with a marker saying how much was cut.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from echo_tools.models import DEFAULT_MAX_OUTPUT_CHARS, ToolDef, ToolResult

BASE64_MIN_CHARS = 256  # a run of base64 this long is data, not words
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_DATA_URI = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(;[\w=.+-]+)*;base64,", re.IGNORECASE)
_BINARY_KEYS = ("data", "blob", "bytes", "base64", "image", "audio")
_HINTS = {
    "validation": "Fix the arguments and try again.",
    "output_validation": "The tool returned malformed output; try different arguments or another tool.",
    "timeout": "The call timed out; try a smaller request or another approach.",
    "permission_denied": "This tool is not permitted here; do not call it again.",
    "not_found": "Use one of the tools you were given.",
    "disabled": "Use one of the tools you were given.",
    "execution": "Check the arguments, or try another approach.",
}


def text_for_llm(
    result: ToolResult, tool: ToolDef | None = None, *, name: str | None = None, max_chars: int | None = None
) -> str:
    """The text a model reads for `result`.

    Args:
        result: the executor's result.
        tool: the tool that ran; its `max_output_chars` bounds the text.
        name: the tool's name as the model knows it (default: the result's name).
        max_chars: overrides the bound (default: `tool.max_output_chars`, else 20,000).
    """
    limit = max_chars or (tool.max_output_chars if tool is not None else DEFAULT_MAX_OUTPUT_CHARS)
    if result.success:
        text = output_text(result.output)
    else:
        text = failure_text(name or result.name, result)
    return truncate(text, limit)


def output_text(output: Any) -> str:
    """A tool's output as text, binary payloads replaced by notes (not bounded: see `text_for_llm`)."""
    kind = type(output)
    if kind is int or (kind is float and math.isfinite(output)):
        return repr(output)  # the JSON text of a number, without json.dumps' cost
    output = without_binary(output)
    if isinstance(output, str):
        return output
    try:
        return json.dumps(output, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(output)


def failure_text(name: str, result: ToolResult) -> str:
    """`Tool 'x' failed (validation): input.values[2]: ... Fix the arguments and try again.`"""
    error = result.error or "unknown error"
    prefix = f"Tool {result.tool_id!r}: "
    if error.startswith(prefix):
        error = error[len(prefix) :]
    kind = result.error_type or "execution"
    error = error.rstrip()
    if not error.endswith((".", "!", "?")):
        error += "."  # the hint is a sentence of its own
    return f"Tool {name!r} failed ({kind}): {error} {_HINTS.get(kind, _HINTS['execution'])}"


def truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = limit
    for _ in range(3):  # the marker's own length depends on the numbers in it
        marker = f"\n[output truncated: {len(text) - keep:,} of {len(text):,} characters cut (max_output_chars={limit:,})]"
        keep = max(0, limit - len(marker))
    return text[:keep] + marker


def without_binary(value: Any, _depth: int = 0) -> Any:
    """`value` with binary payloads replaced by notes of what they were (a copy where anything changed)."""
    if isinstance(value, str):
        return _text_or_note(value)
    if _depth > 50:
        return value
    if isinstance(value, dict):
        mime = value.get("mimeType") or value.get("mime_type") or value.get("media_type")
        out = {}
        for key, item in value.items():
            if isinstance(item, str) and key in _BINARY_KEYS and len(item) >= BASE64_MIN_CHARS:
                out[key] = _note(len(item), mime if isinstance(mime, str) else None)
            else:
                out[key] = without_binary(item, _depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [without_binary(item, _depth + 1) for item in value]
    if isinstance(value, (bytes, bytearray)):
        return _note(len(value), None, unit="bytes")
    return value


def _text_or_note(text: str) -> str:
    if len(text) < BASE64_MIN_CHARS:
        return text
    uri = _DATA_URI.match(text)
    if uri is not None:
        return _note(len(text) - uri.end(), uri.group(1))
    compact = "".join(text.split()) if "\n" in text else text
    if len(compact) >= BASE64_MIN_CHARS and _BASE64.fullmatch(compact):
        return _note(len(compact), None)
    return text


def _note(size: int, mime: str | None, unit: str = "base64 characters") -> str:
    what = f"{mime} data" if mime else "binary data"
    return f"[{what}: {size:,} {unit} omitted]"
