"""Tools written with CrewAI's own `@tool` decorator, the most common CrewAI style (issue 17)."""

from __future__ import annotations

import warnings

with warnings.catch_warnings():  # crewai 1.15's import trips an ImportWarning (see the tests)
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from crewai.tools import tool


@tool("Word Count")
def word_count(text: str, minimum_length: int = 1) -> int:
    """Count the words of a text that have at least `minimum_length` characters."""
    return len([w for w in text.split() if len(w) >= minimum_length])


@tool
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def plain_text(text: str) -> str:
    """Return the text as it is."""
    return text


renamed = tool("Renamed")(plain_text)  # decorated by a call: the module still holds the function


def _make_nested() -> object:
    @tool("Nested")
    def nested(text: str) -> str:
        """Return the text."""
        return text

    return nested


nested_tool = _make_nested()  # its function is not reachable from the module
