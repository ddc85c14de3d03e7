"""Tool calls that small models write as text, recovered: bare or fenced JSON, only for known tool names, bounded.

Small local models often answer a tool request with the right call written as text (a bare JSON object, a
```json fence, `<tool_call>` tags) instead of the structured `tool_calls` field. `recover_tool_calls`
reads such a text back into calls when, and only when, the text is a call: a JSON object (or a list of
them) shaped `{"name": <tool>, "arguments": {...}}` (also `parameters` / `args`, or OpenAI's
`{"function": {"name", "arguments"}}`), with a name among the tools the model was given, standing alone
in the text apart from fences, tags and a short preface, or each alone in a ```json fence of its own
(with prose and other fences around it). Anything else stays text: a Python dict, a JSON
answer, code that happens to hold braces. A call-shaped object naming an unknown tool is reported
(`Recovery.unknown`, with the closest known names) so the model can be told and try again.

A call quoting a string in single quotes (a JSON document inside a call, as small models write it) is read
as a Python literal (`ast.literal_eval`: literals only, nothing runs).

Bounds: texts over `MAX_TEXT_CHARS` are not scanned, at most `MAX_CANDIDATES` opening braces are tried
and at most `MAX_CALLS` calls are returned.

`repeated_call` finds a model calling the same tool with the same arguments again and again (small models
do, instead of answering); `correction_for` writes the message that tells a model what to fix.
`first_new_calls` picks the calls of a turn to make now when calls are made one at a time (a small model
writes dependent calls together, guessing the first one's result); `code_instead_of_call` finds a reply
that runs a tool inside a code block, with an output the model imagines, instead of calling it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from echo_tools.suggest import did_you_mean

__all__ = [
    "MAX_CALLS",
    "MAX_TEXT_CHARS",
    "Recovery",
    "RecoveredCall",
    "call_key",
    "code_instead_instruction",
    "code_instead_of_call",
    "correction_for",
    "first_new_calls",
    "recover_tool_calls",
    "repeated_call",
    "retry_instruction",
    "tool_names_of",
    "tool_schemas_of",
]

MAX_TEXT_CHARS = 16_000  # a call is short; a longer text is an answer
MAX_CANDIDATES = 64  # opening braces tried as the start of a JSON value
MAX_CALLS = 8
MAX_PREFACE_CHARS = 200  # text besides the calls ("I'll use the calculator:") that still makes a call
MAX_NAME_CHARS = 128

_NAME_KEYS = ("name", "tool", "tool_name", "function_name")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")
_WRAPPERS = re.compile(
    r"```[A-Za-z0-9_+-]*[ \t]*\n?|```|</?(?:tool_call|tool_calls|function_call|tools?|json)\s*>",
    re.IGNORECASE,
)
_FENCE_LANGUAGE = re.compile(r"```([A-Za-z0-9_+-]*)")
_CALL_FENCES = {"", "json", "tool_call", "tool_code", "jsonc"}


@dataclass(frozen=True)
class RecoveredCall:
    """One call read from text: a known tool's name and its arguments (a dict)."""

    name: str
    arguments: dict[str, Any]


@dataclass
class Recovery:
    """What `recover_tool_calls` found: the calls, and call-shaped objects naming unknown tools."""

    calls: list[RecoveredCall] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # names of call-shaped objects that are not tools

    def __bool__(self) -> bool:
        return bool(self.calls)


def _name_and_arguments(value: Any) -> tuple[str, Any] | None:
    """(name, arguments) when `value` is shaped like one tool call, else None."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict) and set(value) <= {"function", "type", "id"}:
        return _name_and_arguments(value["function"])
    names = [k for k in _NAME_KEYS if k in value]
    arguments = [k for k in _ARGUMENT_KEYS if k in value]
    if len(names) != 1 or len(arguments) > 1 or len(value) != len(names) + len(arguments):
        return None  # other keys: an answer that happens to hold a "name", not a call
    name = value[names[0]]
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS:
        return None
    args = value[arguments[0]] if arguments else {}
    if isinstance(args, str):  # OpenAI's shape: arguments as a JSON string
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if args is None:
        args = {}
    return (name.strip(), args) if isinstance(args, dict) else None


def _json_values(text: str) -> tuple[list[tuple[int, int, Any]], int]:
    """The JSON objects and arrays in `text` as (start, end, value), outermost only; and braces tried."""
    decoder = json.JSONDecoder()
    found: list[tuple[int, int, Any]] = []
    position, tried = 0, 0
    while tried < MAX_CANDIDATES:
        starts = [i for i in (text.find("{", position), text.find("[", position)) if i != -1]
        if not starts:
            break
        start = min(starts)
        tried += 1
        try:
            value, end = decoder.raw_decode(text, start)
        except (ValueError, RecursionError):  # not JSON there, or nested deeper than the decoder goes
            literal = _python_literal(text, start) if "'" in text else None
            if literal is None:
                position = start + 1
                continue
            value, end = literal
        if isinstance(value, (dict, list)):
            found.append((start, end, value))
        position = end
    return found, tried


def _stands_alone(text: str, spans: list[tuple[int, int]]) -> bool:
    """True when the text around the calls is only fences, tags and whitespace, plus short prose before
    the first call or after the last (not code: no other fence language, no assignment or open call)."""
    between = [text[end:start] for (_, end), (start, _) in pairwise(spans)]
    if any(_WRAPPERS.sub("", gap).strip() for gap in between):
        return False
    preface = text[: spans[0][0]]
    fence = _FENCE_LANGUAGE.findall(preface)
    if fence and fence[-1].lower() not in _CALL_FENCES:
        return False
    words = _WRAPPERS.sub("", preface).strip()
    after = _WRAPPERS.sub("", text[spans[-1][1] :]).strip()
    if len(words) + len(after) > MAX_PREFACE_CHARS or after.startswith((")", ",", ".", ";", "[")):
        return False
    return not words.endswith(("=", "(", ",", ":=", "return"))


def _fenced_alone(text: str, spans: list[tuple[int, int]]) -> bool:
    """True when each call is the whole of a ```json (or bare) fence of its own: a model explaining around
    the calls it shows ("Here's how: ```json {...}``` This returns...") means them, as a fence holds what
    is to be run; prose quoting a call outside a fence, or a call inside a code fence, does not."""
    for start, end in spans:
        before, after = text[:start].rstrip(), text[end:].lstrip()
        if before.count("```") % 2 == 0 or not after.startswith("```"):
            return False  # not inside a fence, or not all of it
        language = before[before.rfind("```") + 3 :].strip().lower()
        if language not in _CALL_FENCES:
            return False
    return True


def _python_literal(text: str, start: int) -> tuple[Any, int] | None:
    """A dict or list written with Python quoting (`'...'` strings, as small models write JSON inside a
    call) at `start`, read with `ast.literal_eval` (literals only, nothing runs); and where it ends."""
    import ast

    opening = text[start]
    closing = "}" if opening == "{" else "]"
    depth, quote, index = 0, "", start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                if char != closing:
                    return None
                try:
                    value = ast.literal_eval(text[start : index + 1])
                except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                    return None
                return (value, index + 1) if isinstance(value, (dict, list)) else None
        index += 1
    return None


def recover_tool_calls(text: Any, tool_names: Iterable[str]) -> Recovery:
    """The tool calls written in `text`, for tools named in `tool_names` only.

    A text is read as calls only when, once the calls, code fences and `<tool_call>`-style tags are
    taken out, at most a short preface (`MAX_PREFACE_CHARS`) is left: a sentence that merely quotes a
    JSON object among other words stays an answer. Call-shaped objects naming a tool that is not known
    are listed in `unknown` and make no call (the text then is no call at all).

    Args:
        text: the model's message content (anything but a string gives no calls).
        tool_names: the names of the tools the model was given.
    """
    recovery = Recovery()
    if not isinstance(text, str) or not text or len(text) > MAX_TEXT_CHARS:
        return recovery
    if "{" not in text:
        return recovery
    known = {name for name in tool_names if isinstance(name, str)}
    by_folded = {name.casefold(): name for name in known}
    values, _ = _json_values(text)
    calls: list[RecoveredCall] = []
    spans: list[tuple[int, int]] = []
    for start, end, value in values:
        items = value if isinstance(value, list) else [value]
        shaped = [_name_and_arguments(item) for item in items]
        if not items or any(s is None for s in shaped):
            continue  # a list mixing calls and other things is data, not calls
        for name, arguments in (s for s in shaped if s is not None):
            real = name if name in known else by_folded.get(name.casefold())
            if real is None:
                recovery.unknown.append(name)
            else:
                calls.append(RecoveredCall(real, arguments))
        spans.append((start, end))
    if recovery.unknown or not calls:
        return recovery
    if not (_stands_alone(text, spans) or _fenced_alone(text, spans)):
        return recovery  # calls quoted inside an answer or inside code are part of it
    recovery.calls = calls[:MAX_CALLS]
    return recovery


def call_key(name: str, arguments: Any) -> str:
    """A canonical text of one call (name and arguments, keys sorted) to compare calls by."""
    return f"{name}:{json.dumps(arguments, sort_keys=True, default=str)}"


def repeated_call(history: Sequence[tuple[str, Any]], limit: int = 2) -> tuple[str, Any] | None:
    """The call made more than `limit` times in a row at the end of `history` ((name, arguments) pairs,
    oldest first), or None. `limit=2` lets a model retry a call once and stops the third identical call."""
    if len(history) <= limit:
        return None
    last = call_key(*history[-1])
    streak = 0
    for name, arguments in reversed(history):
        if call_key(name, arguments) != last:
            break
        streak += 1
    return history[-1] if streak > limit else None


def first_new_calls(
    calls: Sequence[tuple[str, Any]], made: Sequence[tuple[str, Any]], limit: int
) -> list[int]:
    """Which of one turn's `calls` to make now, at most `limit` (their indexes): the first ones not made
    before in `made` (a model asked again tends to write every call of its plan again), else the first.

    A small model writes a plan's dependent calls in one turn and guesses the values the first call would
    give the second (`add_days(...)` and `weekday("2024-02-15")`); made one at a time, the second call is
    written after the first result is read."""
    before = {call_key(name, arguments) for name, arguments in made}
    fresh = [i for i, (name, arguments) in enumerate(calls) if call_key(name, arguments) not in before]
    return (fresh or list(range(len(calls))))[: max(1, limit)]


_CODE_BLOCK = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL)


def code_instead_of_call(text: Any, tool_names: Iterable[str]) -> str | None:
    """The tool that `text` (a reply without tool calls) runs in a code block instead of calling it, or
    None: `def word_count(text): ...` or `print(calculator("2*3"))` inside a fence, the output imagined."""
    if not isinstance(text, str) or "```" not in text or len(text) > MAX_TEXT_CHARS:
        return None
    code = "\n".join(block.group(1) for block in _CODE_BLOCK.finditer(text))
    for name in tool_names:
        if re.search(rf"(?<!\w){re.escape(name)}\s*\(", code):
            return name
    return None


def code_instead_instruction(name: str, tools: Mapping[str, Mapping[str, Any]]) -> str:
    """What to tell a model that wrote code running the tool `name` instead of calling it."""
    properties = tools.get(name, {}).get("properties")
    fields = {f: _placeholder(s) for f, s in properties.items()} if isinstance(properties, Mapping) else {}
    shown = json.dumps({"name": name, "arguments": fields})
    for placeholder in set(fields.values()):
        shown = shown.replace(json.dumps(placeholder), placeholder)
    return (
        f"Do not write code: its output is not known until a tool runs it. Call the tool {name} now. "
        f"Reply with only the call, as JSON, with real values:\n{shown}"
    )


def correction_for(unknown: Iterable[str], tool_names: Iterable[str]) -> str:
    """The message telling a model that it named tools that do not exist, with the closest real names."""
    names = sorted(set(tool_names))
    lines = []
    for name in dict.fromkeys(unknown):
        hint = did_you_mean(name, names)
        lines.append(f"{name!r} is not one of your tools.{hint}")
    listing = ", ".join(names) or "none"
    return (
        " ".join(lines)
        + f" Your tools are: {listing}. Call one of them with its exact name, or answer in plain text."
    )


def _placeholder(schema: Any) -> str:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return f"<{kind if isinstance(kind, str) else 'value'}>"


def retry_instruction(name: str, arguments: Any, error: str, tools: Mapping[str, Mapping[str, Any]]) -> str:
    """What to tell a model whose tool call failed and who answered with words instead of a new call:
    the error, then the call to write, as JSON. A misspelled tool name is replaced by the closest real
    one (its arguments kept); otherwise the arguments are shown as the tool's fields and their types.

    Args:
        name: the failed call's tool name.
        arguments: its arguments.
        error: the tool result's error text.
        tools: the model's tools, name -> JSON Schema of the parameters.
    """
    target, example = name, arguments if isinstance(arguments, dict) else {}
    if name not in tools:
        close = [n for n in tools if n in did_you_mean(name, tools)]
        target = close[0] if close else name
    else:
        properties = tools[name].get("properties")
        if isinstance(properties, Mapping) and properties:
            example = {field: _placeholder(schema) for field, schema in properties.items()}
    shown = json.dumps({"name": target, "arguments": example})
    for placeholder in {v for v in example.values() if isinstance(v, str) and v.startswith("<")}:
        shown = shown.replace(json.dumps(placeholder), placeholder)
    return (
        f"The call to {name} failed: {error.strip()}\nDo not explain. Reply with only the corrected call, "
        f"as JSON, with real values:\n{shown}"
    )


def tool_schemas_of(tools: Iterable[Any]) -> dict[str, Mapping[str, Any]]:
    """name -> parameters JSON Schema of tools given as OpenAI tool dicts."""
    schemas: dict[str, Mapping[str, Any]] = {}
    for tool in tools:
        if isinstance(tool, Mapping):
            inner = tool.get("function")
            function = inner if isinstance(inner, Mapping) else tool
            name, parameters = function.get("name"), function.get("parameters")
            if isinstance(name, str):
                schemas[name] = parameters if isinstance(parameters, Mapping) else {}
    return schemas


def tool_names_of(tools: Iterable[Any]) -> list[str]:
    """The names of tools given as OpenAI tool dicts, LangChain tools or objects with a `name`."""
    names = []
    for tool in tools:
        if isinstance(tool, Mapping):
            inner = tool.get("function")
            name = (inner if isinstance(inner, Mapping) else tool).get("name")
        else:
            name = getattr(tool, "name", None)
        if isinstance(name, str) and name:
            names.append(name)
    return names
