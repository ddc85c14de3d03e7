"""The text_tools tool: length and counts, split, regex extract and replace, template rendering, case.

Every size input can inflate is bounded before it is built: the text and template at most 1 M characters,
the pattern at most 500, at most 1000 matches, and every result (replaced text, rendered template,
extracted matches) at most `MAX_RESULT_CHARS`, computed before the string exists. Patterns run with RE2
(`patterns.py`): linear time, no backtracking, the GIL released while matching. Templates use
`string.Template` (`$name`, `${name}`): substitution only, no code.
"""

from __future__ import annotations

import re
import string
from typing import Any

from AgentTools.text_tools.patterns import MAX_PATTERN_CHARS, InputError, compile_pattern, parse_replacement

OPERATIONS = ("length", "split", "regex_extract", "regex_replace", "template", "case", "truncate")
MAX_TEXT_CHARS = 1_000_000
MAX_RESULT_CHARS = 2_000_000
MAX_MATCHES = 1000
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+|$)")

__all__ = ["MAX_PATTERN_CHARS", "OPERATIONS", "InputError", "TextToolsService", "compile_pattern"]


def _too_large(what: str, size: int, field: str) -> InputError:
    return InputError(
        f"{what} would be {size} characters or more; at most {MAX_RESULT_CHARS} are allowed "
        f"(check {field}, or work on a smaller text)",
        field.split(" ")[0],
    )


class TextToolsService:
    """Text utilities for agents."""

    def run(
        self,
        operation: str,
        text: str = "",
        separator: str | None = None,
        mode: str = "separator",
        max_parts: int = 1000,
        pattern: str | None = None,
        flags: list[str] | None = None,
        group: int | str = 0,
        replacement: str = "",
        template: str | None = None,
        variables: dict[str, Any] | None = None,
        strict: bool = True,
        case: str = "lower",
        max_length: int = 100,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Run one text operation; every result has `operation` and `result`.

        Raises:
            ValueError: an unknown operation, oversized text, a refused or invalid pattern, a missing
                template variable (when strict).
        """
        if operation not in OPERATIONS:
            raise ValueError(f"operation {operation!r} is unknown; expected one of: {', '.join(OPERATIONS)}")
        if len(text) > MAX_TEXT_CHARS:
            raise ValueError(f"text is {len(text)} characters long; at most {MAX_TEXT_CHARS} are allowed")
        if operation == "length":
            words = text.split()
            return {
                "operation": operation,
                "result": len(text),
                "characters": len(text),
                "characters_no_spaces": sum(1 for c in text if not c.isspace()),
                "words": len(words),
                "lines": len(text.splitlines()) if text else 0,
                "sentences": len([s for s in _SENTENCE.findall(text) if s.strip()]),
                "bytes_utf8": len(text.encode("utf-8")),
            }
        if operation == "split":
            return {"operation": operation, "result": self._split(text, mode, separator, max_parts)}
        if operation == "regex_extract":
            return self._extract(text, compile_pattern(pattern or "", flags), group)
        if operation == "regex_replace":
            return self._replace(text, compile_pattern(pattern or "", flags), replacement)
        if operation == "template":
            return self._template(template, variables or {}, strict)
        if operation == "case":
            converters = {"lower": str.lower, "upper": str.upper, "title": str.title, "capitalize": str.capitalize,
                          "snake": _snake, "kebab": lambda t: _snake(t).replace("_", "-")}  # fmt: skip
            if case not in converters:
                raise ValueError(f"case {case!r} is unknown; expected one of: {', '.join(converters)}")
            return {"operation": operation, "result": converters[case](text)}
        if max_length < 1:
            raise ValueError(f"max_length must be at least 1, got {max_length!r}")
        if len(text) <= max_length:
            return {"operation": operation, "result": text, "truncated": False}
        cut = text[: max_length - 1]
        space = cut.rfind(" ")
        cut = cut[:space] if space > max_length // 2 else cut
        return {"operation": operation, "result": cut.rstrip() + "…", "truncated": True}

    @staticmethod
    def _split(text: str, mode: str, separator: str | None, max_parts: int) -> list[str]:
        if not 1 <= max_parts <= 100_000:
            raise ValueError(f"max_parts must be between 1 and 100000, got {max_parts!r}")
        if mode == "lines":
            parts = text.splitlines()
        elif mode == "words":
            parts = text.split(None, max_parts)
        elif mode == "sentences":
            parts = [s.strip() for s in _SENTENCE.findall(text) if s.strip()]
        elif mode == "paragraphs":
            parts = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
        elif mode == "separator":
            if separator == "":
                raise ValueError("separator must not be empty; use mode 'words' to split on whitespace")
            parts = text.split(separator, max_parts)  # None: whitespace; the rest stays in one part
        else:
            raise ValueError(
                f"mode {mode!r} is unknown; expected separator, lines, words, sentences or paragraphs"
            )
        return parts[:max_parts]

    @staticmethod
    def _extract(text: str, compiled: Any, group: int | str) -> dict[str, Any]:
        exists = group in compiled.groupindex if isinstance(group, str) else 0 <= group <= compiled.groups
        if not exists:
            raise ValueError(f"group {group!r} does not exist in pattern {compiled.pattern!r}")
        named = compiled.groupindex
        index = named[group] if isinstance(group, str) else group
        matches: list[Any] = []
        spans: list[list[int]] = []
        groups: list[dict[str, Any]] = []
        size = 0
        for match in compiled.finditer(text):
            # groups may overlap (nested), so count their spans before copying them out of the text
            size += sum(_span_len(match, g) for g in (index, *named.values()))
            if size > MAX_RESULT_CHARS:
                raise _too_large("the extracted matches", size, "pattern and group")
            matches.append(match.group(index))
            spans.append([match.start(), match.end()])
            if named:
                groups.append({name: match.group(number) for name, number in named.items()})
            if len(matches) >= MAX_MATCHES:
                break
        out: dict[str, Any] = {
            "operation": "regex_extract",
            "result": matches,
            "count": len(matches),
            "spans": spans,
        }
        if named:
            out["groups"] = groups
        return out

    @staticmethod
    def _replace(text: str, compiled: Any, replacement: str) -> dict[str, Any]:
        pieces = parse_replacement(replacement, compiled)
        chunks: list[str] = []
        size = end = count = 0
        for match in compiled.finditer(text):
            start = match.start()
            size += start - end + sum(len(p) if isinstance(p, str) else _span_len(match, p) for p in pieces)
            if size > MAX_RESULT_CHARS:
                raise _too_large("the replaced text", size + len(text) - match.end(), "replacement")
            chunks.append(text[end:start])
            chunks.extend(p if isinstance(p, str) else match.group(p) or "" for p in pieces)
            end = match.end()
            count += 1
        if size + len(text) - end > MAX_RESULT_CHARS:
            raise _too_large("the replaced text", size + len(text) - end, "replacement")
        chunks.append(text[end:])
        return {"operation": "regex_replace", "result": "".join(chunks), "replacements": count}

    @staticmethod
    def _template(template: str | None, variables: dict[str, Any], strict: bool) -> dict[str, Any]:
        if template is None:
            raise ValueError("operation 'template' needs template, e.g. 'Hello $name'")
        if len(template) > MAX_TEXT_CHARS:
            raise ValueError(
                f"template is {len(template)} characters long; at most {MAX_TEXT_CHARS} are allowed"
            )
        compiled = string.Template(template)
        values = {k: v if isinstance(v, str) else str(v) for k, v in variables.items()}
        size = _rendered_size(compiled, values)
        if size > MAX_RESULT_CHARS:
            raise _too_large("the rendered template", size, "template and variables")
        missing = sorted({n for n in compiled.get_identifiers() if n not in values})
        if strict and missing:
            raise ValueError(
                f"template uses variables {missing!r} that are not in variables; give them or set strict to false"
            )
        try:
            result = compiled.safe_substitute(values)
        except ValueError as exc:
            raise ValueError(f"template {template[:60]!r} is malformed: {exc}") from exc
        return {"operation": "template", "result": result, "missing": missing}


def _span_len(match: Any, group: int) -> int:
    start, end = match.span(group)
    return end - start if start >= 0 else 0


def _rendered_size(compiled: string.Template, values: dict[str, str]) -> int:
    """How long `safe_substitute(values)` would be, without building it."""
    size = end = 0
    for match in compiled.pattern.finditer(compiled.template):
        size += match.start() - end
        name = match.group("named") or match.group("braced")
        if match.group("escaped") is not None:
            size += 1
        elif name is not None and name in values:
            size += len(values[name])
        else:
            size += match.end() - match.start()  # left as written
        end = match.end()
    return size + len(compiled.template) - end


def _snake(text: str) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
