"""Tools written for other frameworks, and plain functions, that the ingestion tests bring into a catalogue."""

from __future__ import annotations

import warnings
from typing import Literal

from pydantic import BaseModel, Field

with warnings.catch_warnings():  # crewai 1.15's import trips an ImportWarning (see the tests)
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from crewai.tools import BaseTool as CrewBaseTool
from langchain_core.tools import BaseTool as LangChainBaseTool
from langchain_core.tools import StructuredTool


def convert(amount: float, currency: Literal["EUR", "USD"] = "EUR", note: str | None = None) -> dict:
    """Convert an amount into a currency.

    Longer explanation that is not part of the summary's first paragraph.

    Args:
        amount: How much to convert.
        currency (str): The target currency,
            written as an ISO code.
        note: A free-form note.

    Returns:
        The converted amount.
    """
    rate = {"EUR": 1.0, "USD": 1.5}[currency]
    result = {"amount": amount * rate, "currency": currency}
    if note is not None:
        result["note"] = note
    return result


async def greet(name: str, excited: bool = False) -> str:
    """Say hello.

    Args:
        name: Who to greet.
        excited: Add an exclamation mark.
    """
    return f"Hello, {name}{'!' if excited else '.'}"


class Nested:
    def method(self, x: int) -> int:
        return x


class WordCountInput(BaseModel):
    text: str = Field(description="The text to count words in")
    minimum: int = Field(default=1, description="Only count words at least this long")


class WordCountTool(LangChainBaseTool):
    """A LangChain tool class that constructs without arguments."""

    name: str = "word_count"
    description: str = "Count the words of a text."
    args_schema: type[BaseModel] = WordCountInput

    def _run(self, text: str, minimum: int = 1) -> int:
        return len([w for w in text.split() if len(w) >= minimum])


def reverse_text(text: str) -> str:
    """Reverse a text."""
    return text[::-1]


def make_reverse_tool() -> StructuredTool:
    """A factory: the executor cannot rebuild a StructuredTool from its class, but it can call this."""
    return StructuredTool.from_function(reverse_text, name="reverse", description="Reverse a text.")


class RepeatInput(BaseModel):
    word: str = Field(description="The word to repeat")
    times: int = Field(default=2, ge=1, le=5, description="How often")


class RepeatTool(CrewBaseTool):
    """A CrewAI tool class that constructs without arguments."""

    name: str = "Repeat Word"
    description: str = "Repeat a word a few times."
    args_schema: type[BaseModel] = RepeatInput

    def _run(self, word: str, times: int = 2) -> str:
        return " ".join([word] * times)
