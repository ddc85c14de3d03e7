"""A JSONPath subset, evaluated without `eval`.

Supported: `$`, `.key`, `['key']` / `["key"]`, `[n]` and `[-n]`, `[start:end]`, `[*]` and `.*`, unions
`[0,2]` / `['a','b']`, recursive descent `..key` / `..*`, and filters `[?(@.key)]` and
`[?(@.key <op> literal)]` with `== != < <= > >=` (literal: number, 'string', true, false, null).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

MAX_PATH_CHARS = 500
MAX_MATCHES = 10_000
_FILTER = re.compile(
    r"^\?\(\s*@((?:\.[A-Za-z_][\w-]*|\[\s*'[^']*'\s*\])*)\s*(?:(==|!=|<=|>=|<|>)\s*(.+?))?\s*\)$"
)
_KEY = re.compile(r"\.([A-Za-z_$][\w$-]*)|\[\s*'([^']*)'\s*\]")

Step = Callable[[Any], Iterator[Any]]


def _children(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        yield from value.values()
    elif isinstance(value, list):
        yield from value


def _descendants(value: Any) -> Iterator[Any]:
    yield value
    for child in _children(value):
        yield from _descendants(child)


def _key_step(key: str) -> Step:
    def step(value: Any) -> Iterator[Any]:
        if isinstance(value, dict) and key in value:
            yield value[key]

    return step


def _index_step(index: int) -> Step:
    def step(value: Any) -> Iterator[Any]:
        if isinstance(value, list) and -len(value) <= index < len(value):
            yield value[index]

    return step


def _slice_step(start: int | None, stop: int | None, stride: int | None) -> Step:
    if stride == 0:
        raise ValueError("path slice step must not be 0")

    def step(value: Any) -> Iterator[Any]:
        if isinstance(value, list):
            yield from value[start:stop:stride]

    return step


def _literal(text: str, path: str) -> Any:
    text = text.strip()
    if text.startswith("'") and text.endswith("'") and len(text) >= 2:
        return text[1:-1]
    try:
        return json.loads(text)
    except ValueError:
        raise ValueError(
            f"path {path!r}: filter value {text!r} must be a number, 'string', true, false or null"
        ) from None


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": lambda a, b: a == b,
    "!=": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _filter_step(expression: str, path: str) -> Step:
    match = _FILTER.match(expression)
    if not match:
        raise ValueError(
            f"path {path!r}: filter [{expression}] is not supported; use [?(@.key)] or [?(@.key == value)]"
        )
    keys = [a or b for a, b in _KEY.findall(match.group(1))]
    op, literal = match.group(2), _literal(match.group(3), path) if match.group(2) else None

    def lookup(item: Any) -> tuple[bool, Any]:
        for key in keys:
            if not isinstance(item, dict) or key not in item:
                return False, None
            item = item[key]
        return True, item

    def step(value: Any) -> Iterator[Any]:
        for item in _children(value):
            found, got = lookup(item)
            if not found:
                continue
            if op is None:
                yield item
                continue
            try:
                if _COMPARE[op](got, literal):
                    yield item
            except TypeError:
                continue  # comparing a string with a number: not a match

    return step


def _bracket_step(inner: str, path: str) -> Step:
    inner = inner.strip()
    if inner == "*":
        return _children
    if inner.startswith("?"):
        return _filter_step(inner, path)
    if ":" in inner:
        parts = [p.strip() for p in inner.split(":")]
        if len(parts) > 3 or not all(re.fullmatch(r"-?\d*", p) for p in parts):
            raise ValueError(f"path {path!r}: slice [{inner}] must be [start:end] or [start:end:step]")
        nums = [int(p) if p else None for p in parts] + [None] * (3 - len(parts))
        return _slice_step(nums[0], nums[1], nums[2])
    steps: list[Step] = []
    for part in (p.strip() for p in inner.split(",")):
        if re.fullmatch(r"-?\d+", part):
            steps.append(_index_step(int(part)))
        elif len(part) >= 2 and part[0] == part[-1] and part[0] in "'\"":
            steps.append(_key_step(part[1:-1]))
        else:
            raise ValueError(
                f"path {path!r}: [{inner}] is not an index, a quoted key, '*', a slice or a filter"
            )
    if len(steps) == 1:
        return steps[0]
    return lambda value: (found for s in steps for found in s(value))


def compile_path(path: str) -> list[tuple[bool, Step]]:
    """Parse `path` into steps of (recursive, step). Raises `ValueError` naming the path on bad syntax."""
    if len(path) > MAX_PATH_CHARS:
        raise ValueError(f"path is {len(path)} characters long; at most {MAX_PATH_CHARS} are allowed")
    text = path.strip()
    if not text.startswith("$"):
        raise ValueError(f"path {path!r} must start with '$' (e.g. '$.items[0].name')")
    i, steps = 1, []
    while i < len(text):
        recursive = text.startswith("..", i)
        if recursive:
            i += 2
            if i < len(text) and text[i] == "[":
                pass
            else:
                match = re.match(r"\*|[A-Za-z_$][\w$-]*", text[i:])
                if not match:
                    raise ValueError(f"path {path!r}: expected a name or '*' after '..' at position {i}")
                name = match.group(0)
                steps.append((True, _children if name == "*" else _key_step(name)))
                i += len(name)
                continue
        if text[i] == ".":
            match = re.match(r"\*|[A-Za-z_$][\w$-]*", text[i + 1 :])
            if not match:
                raise ValueError(f"path {path!r}: expected a name or '*' after '.' at position {i}")
            name = match.group(0)
            steps.append((False, _children if name == "*" else _key_step(name)))
            i += 1 + len(name)
        elif text[i] == "[":
            depth, j = 0, i
            quote = None
            while j < len(text):
                char = text[j]
                if quote:
                    quote = None if char == quote else quote
                elif char in "'\"":
                    quote = char
                elif char == "[":
                    depth += 1
                elif char == "]":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            if j >= len(text):
                raise ValueError(f"path {path!r}: '[' at position {i} is not closed")
            steps.append((recursive, _bracket_step(text[i + 1 : j], path)))
            i = j + 1
        else:
            raise ValueError(f"path {path!r}: unexpected {text[i]!r} at position {i}")
    return steps


def query(data: Any, path: str) -> list[Any]:
    """All values of `data` that `path` selects, in document order (at most MAX_MATCHES)."""
    current = [data]
    for recursive, step in compile_path(path):
        nxt: list[Any] = []
        for value in current:
            sources = _descendants(value) if recursive else (value,)
            for source in sources:
                for found in step(source):
                    nxt.append(found)
                    if len(nxt) > MAX_MATCHES:
                        raise ValueError(f"path {path!r} selects more than {MAX_MATCHES} values; narrow it")
        current = nxt
    return current
