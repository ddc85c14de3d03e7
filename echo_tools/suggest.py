""" "Did you mean ...?": the closest known names to a mistyped tool name, field, enum value or command.

Used only on error paths (an unknown tool, an input that failed its schema, a CLI typo), so nothing here
costs a successful call anything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo_tools.lookup import ToolLookup

__all__ = ["close_matches", "did_you_mean", "explain_schema_error", "tool_hint"]

_CUTOFF = 0.6


def close_matches(word: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` of `candidates` closest to `word`, best first, ignoring case; [] when none is close.
    A word that begins a candidate, or one of its words, counts as close (`calc` for `Calculator`)."""
    import difflib  # error paths only: keep it off `import echo_tools`

    by_folded: dict[str, str] = {}
    for candidate in candidates:
        by_folded.setdefault(candidate.casefold(), candidate)
    wanted = word.casefold()
    folded = difflib.get_close_matches(wanted, list(by_folded), n=n, cutoff=_CUTOFF)
    if len(wanted) >= 3:  # a typed prefix: people shorten names
        starts = [f for f in by_folded if _words(f)[0].startswith(wanted) or f.startswith(wanted)]
        folded = list(dict.fromkeys([*folded, *sorted(starts, key=len)]))[:n]
    return [by_folded[f] for f in folded]


def _words(text: str) -> list[str]:
    import re

    return re.split(r"[\s_.\-]+", text.removeprefix("tool_")) or [text]


def _alternatives(word: str, candidates: Iterable[str]) -> str:
    """`'values'`, `'add' or 'mean'`, or "" when nothing is close."""
    return " or ".join(repr(m) for m in close_matches(word, candidates) if m != word)


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """`" Did you mean 'values'?"` (or two or three names), or "" when nothing is close."""
    alternatives = _alternatives(word, candidates)
    return f" Did you mean {alternatives}?" if alternatives else ""


def tool_hint(registry: ToolLookup, ref: Any) -> str:
    """`". Did you mean 'Calculator'?"` from the registry's tool names (then ids), or "": appended to
    "No tool matches 'x'"."""
    if not isinstance(ref, str) or not ref:
        return ""
    tools = registry.list_all()
    # names first: they are what people type; ids when no name is close
    hint = did_you_mean(ref, [t.name for t in tools]) or did_you_mean(ref, [t.tool_id for t in tools])
    return f".{hint}" if hint else ""


def _subschema(schema: Any, path: Iterable[Any]) -> Any:
    """The part of `schema` at `path` (a validation error's schema path), or None where it cannot follow."""
    node = schema
    for part in path:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            node = node[part]
        else:
            return None
    return node


def explain_schema_error(error: Any, where: str, schema: Any) -> str | None:
    """A readable message with a suggestion for an unknown field or enum value, or None for other errors.

    An unknown field is named as the field (`input.valuez: unknown field 'valuez'; did you mean
    'values'? ...`), so the error's field names it too.

    Args:
        error: a jsonschema-rs `ValidationError`.
        where: the error's location as shown (`input`, `input.options`).
        schema: the whole schema the value was checked against.
    """
    kind = type(error.kind).__name__
    if kind == "AdditionalProperties":
        owner = _subschema(schema, list(error.schema_path)[:-1])
        props = owner.get("properties") if isinstance(owner, dict) else None
        if not isinstance(props, dict):
            return None
        unexpected = [str(name) for name in error.kind.unexpected]
        parts = [f"{name!r}" + _paren(_alternatives(name, props)) for name in unexpected]
        noun = "field" if len(unexpected) == 1 else "fields"
        known = ", ".join(sorted(props)) or "none"
        return f"{where}.{unexpected[0]}: unknown {noun} {', '.join(parts)}; the fields are: {known}"
    if kind == "Enum" and isinstance(error.instance, str):
        options = [o for o in error.kind.options if isinstance(o, str)]
        hint = did_you_mean(error.instance, options)
        return f"{where}: {error.message}.{hint}" if hint else None
    return None


def _paren(alternatives: str) -> str:
    return f" (did you mean {alternatives}?)" if alternatives else ""


def usage_hint(message: str, option_strings: Iterable[str]) -> str:
    """ " Did you mean 'list'?" for an argparse usage error about a mistyped command or option, else ""."""
    import re

    choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if choice is not None:
        return did_you_mean(choice.group(1), [c.strip(" '") for c in choice.group(2).split(",")])
    unknown = re.search(r"unrecognized arguments: (\S+)", message)
    if unknown is not None and unknown.group(1).startswith("--"):
        return did_you_mean(unknown.group(1).split("=", 1)[0], option_strings)
    return ""
