"""What a model reads of a tool's result: one rendering for every adapter, bounded in size.

A successful output is its text (strings as they are, anything else as JSON); a failure is a sentence
naming the tool, the error and what to do next. Binary payloads (base64 runs, `data:` URIs, the `data` of
image, audio and blob content) never reach the model raw: each becomes a short note of what was left out.
The text is cut at the tool's `max_output_chars` with a marker saying how much was cut.

MCP content blocks beside the output (`metadata["content"]`: image, audio, resource link, embedded
resource) each add one numbered note to the text (`[image 1: image/png, 300 KB]`, a resource's URI and the
tool that reads it); an embedded text resource adds its text. `content_blocks` gives LangChain's content
blocks: the text, then each image as a base64 image block, for multimodal chat models.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from echo_tools.models import DEFAULT_MAX_OUTPUT_CHARS, ToolDef, ToolResult, slugify

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
        notes = content_notes(result)
        if notes:
            text = notes if result.output is None else f"{text}\n{notes}"
    else:
        text = failure_text(name or result.name, result)
    return truncate(text, limit)


def mcp_blocks(result: ToolResult) -> list[dict[str, Any]]:
    """The MCP content blocks a result carries beside its output (`metadata["content"]`)."""
    blocks = result.metadata.get("content") if result.success else None
    if not isinstance(blocks, list):
        return []
    return [b for b in blocks if isinstance(b, dict) and isinstance(b.get("type"), str)]


def content_notes(result: ToolResult) -> str:
    """One line per MCP content block (an embedded text resource: its note, then its text)."""
    server = result.metadata.get("mcp_server")
    reader = f"{slugify(f'{server}_read_resource')}" if isinstance(server, str) else None
    lines = []
    for number, block in enumerate(mcp_blocks(result), 1):
        kind = block["type"]
        if kind in ("image", "audio"):
            lines.append(f"[{kind} {number}: {_describe(block.get('mimeType'), block.get('data'))}]")
        elif kind == "resource_link":
            what = ", ".join(
                str(x) for x in (block.get("mimeType"), _size(block.get("size"))) if x is not None
            )
            title = block.get("title") or block.get("name")
            follow = f"; read it with the tool {reader}" if reader else ""
            lines.append(
                f"[resource link {number}: {block.get('uri')}"
                f"{f' ({what})' if what else ''}{f' {title!r}' if title else ''}{follow}]"
            )
        elif kind == "resource" and isinstance(block.get("resource"), dict):
            res = block["resource"]
            if isinstance(res.get("text"), str):
                mime = res.get("mimeType") or "text"
                lines.append(f"[resource {number}: {res.get('uri')}, {mime}]")
                lines.append(_text_or_note(res["text"]))
            else:
                lines.append(
                    f"[resource {number}: {res.get('uri')}, {_describe(res.get('mimeType'), res.get('blob'))}]"
                )
        else:
            lines.append(f"[{kind} {number}]")
    return "\n".join(lines)


def content_blocks(
    result: ToolResult, tool: ToolDef | None = None, *, name: str | None = None
) -> str | list[dict[str, Any]]:
    """What a LangChain tool returns for `result`: its text (`text_for_llm`), or, when the result holds
    MCP images, LangChain content blocks: the text, then `{"type": "image", "base64", "mime_type"}` per
    image (audio and resources stay notes in the text)."""
    text = text_for_llm(result, tool, name=name)
    images = [
        {"type": "image", "base64": b["data"], "mime_type": b.get("mimeType") or "image/png"}
        for b in mcp_blocks(result)
        if b["type"] == "image" and isinstance(b.get("data"), str)
    ]
    if not images:
        return text
    return [{"type": "text", "text": text}, *images]


def _describe(mime: Any, data: Any) -> str:
    size = _size(len(data) * 3 // 4) if isinstance(data, str) else None
    return ", ".join(str(x) for x in (mime or "binary", size) if x is not None)


def _size(size: Any) -> str | None:
    if not isinstance(size, int) or isinstance(size, bool):
        return None
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:,.0f} KB"
    return f"{size / (1024 * 1024):,.1f} MB"


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
