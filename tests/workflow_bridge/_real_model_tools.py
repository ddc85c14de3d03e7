"""Small tools for the real-model tests: each records its calls, so tests assert on side effects."""

from __future__ import annotations

from typing import Any

CALLS: list[tuple[str, dict[str, Any]]] = []


def multiply(a: float, b: float) -> float:
    """Multiply two numbers and return the product.

    Args:
        a: the first number.
        b: the second number.
    """
    CALLS.append(("multiply", {"a": a, "b": b}))
    return a * b


def add(a: float, b: float) -> float:
    """Add two numbers and return the sum.

    Args:
        a: the first number.
        b: the second number.
    """
    CALLS.append(("add", {"a": a, "b": b}))
    return a + b


def save_note(text: str) -> str:
    """Save a short note for the team and return a confirmation.

    Args:
        text: the note to save.
    """
    CALLS.append(("save_note", {"text": text}))
    return f"saved note {len(CALLS)}"
