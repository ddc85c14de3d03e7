"""Caller-supplied regular expressions, run with RE2: linear time in the text, and the GIL released while it
matches, so no pattern can freeze the server (Python's `re` backtracks: `(a|a)*b` on 26 a's took minutes).

RE2 has no backreferences or lookaround; a pattern using them is refused with the feature named. Python's
Unicode meaning of `\\d`, `\\w` and `\\s` is kept by rewriting them to Unicode classes (RE2's are ASCII).
Replacement templates (`\\1`, `\\g<name>`) are parsed here, so the size of a replacement is known before
it is built.
"""

from __future__ import annotations

from typing import Any

import re2

MAX_PATTERN_CHARS = 500


class InputError(ValueError):
    """A refused input; `field` names the input field (`pattern`, `replacement`, ...) it is about."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


FLAGS = {"ignorecase": "i", "multiline": "m", "dotall": "s"}
_SPACE = r"\t\n\v\f\r \x1c-\x1f\x85\p{Z}"
_OUTSIDE = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": r"[\p{L}\p{N}_]", "W": r"[^\p{L}\p{N}_]",
            "s": f"[{_SPACE}]", "S": f"[^{_SPACE}]"}  # fmt: skip
_INSIDE = {"d": r"\p{Nd}", "D": r"\P{Nd}", "w": r"\p{L}\p{N}_", "s": _SPACE}
# what RE2's parse errors mean, in the words of someone who wrote a Python pattern
_UNSUPPORTED = (
    ("invalid perl operator: (?=", "a lookahead '(?=...)'"),
    ("invalid perl operator: (?!", "a negative lookahead '(?!...)'"),
    ("invalid perl operator: (?<=", "a lookbehind '(?<=...)'"),
    ("invalid perl operator: (?<!", "a negative lookbehind '(?<!...)'"),
    ("invalid perl operator: (?>", "an atomic group '(?>...)'"),
    ("invalid perl operator: (?(", "a conditional group '(?(...)...)'"),
    ("invalid perl operator: (?P=", "a named backreference '(?P=name)'"),
    ("invalid perl operator: (?P>", "a recursive group"),
    ("bad repetition operator: ++", "a possessive quantifier '++'"),
    ("bad repetition operator: *+", "a possessive quantifier '*+'"),
    ("bad repetition operator: ?+", "a possessive quantifier '?+'"),
)


def _unsupported(pattern: str, error: str) -> str | None:
    """The feature RE2 lacks that `pattern` uses, judged from RE2's error, or None."""
    for prefix, feature in _UNSUPPORTED:
        if error.startswith(prefix):
            return feature
    if error.startswith("invalid escape sequence: \\") and error[-1:].isdigit():
        return f"a backreference '{error.rsplit(' ', 1)[-1]}'"
    if "(?P=" in pattern and error.startswith("invalid perl operator: (?P"):
        return "a named backreference '(?P=name)'"
    if error.startswith("invalid escape sequence: \\Z"):
        return "'\\Z' (write '\\z' for the end of the text)"
    return None


def _unicode_classes(pattern: str) -> str:
    """`pattern` with `\\d \\w \\s` (and their negations) meaning what they mean in Python's `re`."""
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            code = pattern[i + 1]
            table = _INSIDE if in_class else _OUTSIDE
            out.append(table.get(code, char + code))
            i += 2
            continue
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
            i += 1
            # a ']' right after '[' or '[^' is a literal member, not the end of the class
            if pattern[i : i + 1] == "^":
                out.append("^")
                i += 1
            if pattern[i : i + 1] == "]":
                out.append("]")
                i += 1
            continue
        if char == "]" and in_class:
            in_class = False
        out.append(char)
        i += 1
    return "".join(out)


def compile_pattern(pattern: str, flags: list[str] | None) -> Any:
    """The RE2 program of a caller's pattern; errors name `pattern` (or `flags`) and the value.

    Raises:
        InputError: empty or over-long, a feature RE2 lacks (named), an invalid pattern, an unknown flag.
    """
    if not pattern:
        raise InputError("pattern is empty; give a regular expression", "pattern")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InputError(
            f"pattern is {len(pattern)} characters long; at most {MAX_PATTERN_CHARS} are allowed", "pattern"
        )
    inline = ""
    for flag in flags or []:
        if flag not in FLAGS:
            raise InputError(f"flags entry {flag!r} is unknown; expected: {', '.join(FLAGS)}", "flags")
        inline += FLAGS[flag]
    options = re2.Options()
    options.log_errors = False
    source = (f"(?{inline})" if inline else "") + _unicode_classes(pattern)
    try:
        return re2.compile(source, options)
    except re2.error as exc:
        error = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        feature = _unsupported(pattern, error)
        if feature:
            raise InputError(
                f"pattern {pattern!r} uses {feature}, which text_tools' regex engine (RE2) does not "
                "support: it runs every pattern in linear time, so it has no backreferences, lookaround "
                "or atomic groups; rewrite the pattern without it",
                "pattern",
            ) from exc
        raise InputError(
            f"pattern {pattern!r} is not a valid regular expression: {error}", "pattern"
        ) from exc


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "a": "\a", "b": "\b", "\\": "\\"}


def parse_replacement(replacement: str, compiled: Any) -> list[str | int]:
    """`replacement` as literal strings and group numbers, with Python's `re.sub` escapes.

    Raises:
        InputError: a group that does not exist or a bad escape, naming `replacement`.
    """
    pieces: list[str | int] = []
    literal: list[str] = []
    i = 0

    def group(ref: str) -> int:
        index = int(ref) if ref.isdigit() else compiled.groupindex.get(ref)
        if index is None or not 0 <= index <= compiled.groups:
            raise InputError(
                f"replacement {replacement!r} refers to group {ref!r}, which the pattern does not have",
                "replacement",
            )
        return int(index)

    while i < len(replacement):
        char = replacement[i]
        if char != "\\" or i + 1 == len(replacement):
            literal.append(char)
            i += 1
            continue
        code = replacement[i + 1]
        if code == "g":
            end = replacement.find(">", i)
            if replacement[i + 2 : i + 3] != "<" or end < 0:
                raise InputError(
                    f"replacement {replacement!r} has '\\g' without '<name>' at {i}", "replacement"
                )
            ref, i = replacement[i + 3 : end], end + 1
        elif code == "0":  # as in Python: an octal escape, never a group
            digits = replacement[i + 1 : i + 4]
            digits = digits[: next((n for n, d in enumerate(digits) if d not in "01234567"), len(digits))]
            literal.append(chr(int(digits, 8)))
            i += 1 + len(digits)
            continue
        elif code.isdigit():
            ref = code + (replacement[i + 2] if replacement[i + 2 : i + 3].isdigit() else "")
            i += 1 + len(ref)
        elif code in _ESCAPES:
            literal.append(_ESCAPES[code])
            i += 2
            continue
        elif code.isascii() and code.isalpha():
            raise InputError(f"replacement {replacement!r} has the unknown escape '\\{code}'", "replacement")
        else:
            literal.append(char + code)
            i += 2
            continue
        pieces.append("".join(literal))
        literal = []
        pieces.append(group(ref))
    pieces.append("".join(literal))
    return [p for p in pieces if p != ""]
