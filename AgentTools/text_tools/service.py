"""The text_tools tool: length and counts, split, regex extract and replace, template rendering, case.

Regular expressions are guarded: the pattern is at most 500 characters, the text at most 1 MB, nested
quantifiers such as `(a+)+` (the usual catastrophic-backtracking shape) are refused, and at most 1000
matches are returned. Templates use `string.Template` (`$name`, `${name}`): substitution only, no code.
"""

from __future__ import annotations

import re
import string
from typing import Any

OPERATIONS = ("length", "split", "regex_extract", "regex_replace", "template", "case", "truncate")
MAX_TEXT_CHARS = 1_000_000
MAX_PATTERN_CHARS = 500
MAX_MATCHES = 1000
_NESTED_QUANTIFIER = re.compile(r"\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d*,)")
_FLAGS = {"ignorecase": re.IGNORECASE, "multiline": re.MULTILINE, "dotall": re.DOTALL}
_SENTENCE = re.compile(r"[^.!?]+(?:[.!?]+|$)")


def compile_pattern(pattern: str, flags: list[str] | None) -> re.Pattern[str]:
    """Compile a user pattern after the guards; errors name the pattern."""
    if not pattern:
        raise ValueError("pattern is empty; give a regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(
            f"pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} are allowed"
        )
    if _NESTED_QUANTIFIER.search(pattern):
        raise ValueError(
            f"pattern {pattern!r} repeats a group that itself repeats (like '(a+)+'), which can take exponential "
            "time; rewrite it without the nested quantifier"
        )
    value = 0
    for flag in flags or []:
        if flag not in _FLAGS:
            raise ValueError(f"flags entry {flag!r} is unknown; expected: {', '.join(_FLAGS)}")
        value |= _FLAGS[flag]
    try:
        return re.compile(pattern, value)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc


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
            compiled = compile_pattern(pattern or "", flags)
            try:
                result, count = compiled.subn(replacement, text)
            except (re.error, IndexError) as exc:
                raise ValueError(
                    f"replacement {replacement!r} is invalid for pattern {pattern!r}: {exc}"
                ) from exc
            return {"operation": operation, "result": result, "replacements": count}
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
            parts = text.split()
        elif mode == "sentences":
            parts = [s.strip() for s in _SENTENCE.findall(text) if s.strip()]
        elif mode == "paragraphs":
            parts = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
        elif mode == "separator":
            if separator == "":
                raise ValueError("separator must not be empty; use mode 'words' to split on whitespace")
            parts = text.split(separator) if separator is not None else text.split()
        else:
            raise ValueError(
                f"mode {mode!r} is unknown; expected separator, lines, words, sentences or paragraphs"
            )
        return parts[:max_parts]

    @staticmethod
    def _extract(text: str, compiled: re.Pattern[str], group: int | str) -> dict[str, Any]:
        exists = group in compiled.groupindex if isinstance(group, str) else 0 <= group <= compiled.groups
        if not exists:
            raise ValueError(f"group {group!r} does not exist in pattern {compiled.pattern!r}")
        matches: list[Any] = []
        spans: list[list[int]] = []
        named: list[dict[str, Any]] = []
        for match in compiled.finditer(text):
            matches.append(match.group(group))
            spans.append([match.start(), match.end()])
            if compiled.groupindex:
                named.append(match.groupdict())
            if len(matches) >= MAX_MATCHES:
                break
        out: dict[str, Any] = {
            "operation": "regex_extract",
            "result": matches,
            "count": len(matches),
            "spans": spans,
        }
        if compiled.groupindex:
            out["groups"] = named
        return out

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


def _snake(text: str) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()
