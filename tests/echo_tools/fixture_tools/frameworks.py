"""Tiny real CrewAI and LangChain tool classes for the framework backends' tests."""

from __future__ import annotations

import asyncio
from typing import Any

from crewai.tools import BaseTool as CrewBaseTool
from langchain_core.tools import BaseTool as LCBaseTool
from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field


class WordsArgs(BaseModel):
    text: str = Field(description="text to count")
    minimum: int = Field(default=1, description="shortest word counted")


class CrewWordCounter(CrewBaseTool):
    name: str = "word_counter"
    description: str = "Counts the words of a text."
    args_schema: type[BaseModel] = WordsArgs

    def _run(self, text: str, minimum: int = 1) -> str:
        return f"{len([w for w in text.split() if len(w) >= minimum])} words"


class CrewAsyncUpper(CrewBaseTool):
    name: str = "async_upper"
    description: str = "Upper-cases a text, asynchronously."
    args_schema: type[BaseModel] = WordsArgs

    def _run(self, text: str, minimum: int = 1) -> str:
        raise AssertionError("the async path must be used")

    async def _arun(self, text: str, minimum: int = 1) -> str:
        await asyncio.sleep(0)
        return text.upper()


class CrewLimited(CrewBaseTool):
    name: str = "limited"
    description: str = "Works once."
    args_schema: type[BaseModel] = WordsArgs
    max_usage_count: int | None = 1

    def _run(self, text: str, minimum: int = 1) -> str:
        return text


class CrewBroken(CrewBaseTool):
    name: str = "broken"
    description: str = "Always fails."
    args_schema: type[BaseModel] = WordsArgs

    def _run(self, text: str, minimum: int = 1) -> str:
        raise RuntimeError(f"cannot handle {text!r}")


class LCWordCounter(LCBaseTool):
    name: str = "lc_word_counter"
    description: str = "Counts the words of a text."
    args_schema: type[BaseModel] = WordsArgs

    def _run(self, text: str, minimum: int = 1, **kwargs: Any) -> dict[str, int]:
        return {"words": len([w for w in text.split() if len(w) >= minimum])}


def make_lc_multiplier() -> StructuredTool:
    """A factory returning a LangChain StructuredTool built from a function."""

    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        return a * b

    return StructuredTool.from_function(multiply)


def make_lc_failing() -> StructuredTool:
    def fail(text: str) -> str:
        """Always raises a ToolException."""
        raise ToolException(f"no luck with {text}")

    return StructuredTool.from_function(fail)


def make_lc_thread_name() -> StructuredTool:
    import threading

    def where(text: str) -> str:
        """Name the thread this runs on."""
        return threading.current_thread().name

    return StructuredTool.from_function(where)


def make_lc_async() -> StructuredTool:
    async def shout(text: str) -> str:
        """Upper-case a text asynchronously."""
        await asyncio.sleep(0)
        return text.upper()

    return StructuredTool.from_function(coroutine=shout, name="shout", description="Upper-case a text.")
