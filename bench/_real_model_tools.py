"""The tools of bench/bench_real_model.py: plain functions, given to the stock agent as LangChain tools and
to echo-tools' agent through the registry and executor (the same code either way)."""

from __future__ import annotations

import ast
import datetime as dt
import json
import operator
from typing import Any

_OPERATORS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        right = _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 64:
            raise ValueError("exponent too large")
        return _OPERATORS[type(node.op)](_evaluate(node.left), right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression element: {type(node).__name__}")


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / // % ** and parentheses, e.g. "(3 + 4) * 2".

    Args:
        expression: the arithmetic expression.
    """
    value = _evaluate(ast.parse(expression.replace("^", "**"), mode="eval"))
    return str(int(value) if float(value).is_integer() else round(value, 6))


def json_get(json_text: str, path: str) -> str:
    """Read one value from a JSON document by a dotted path, e.g. "order.items.0.price".

    Args:
        json_text: the JSON document.
        path: keys and list indexes separated by dots.
    """
    value: Any = json.loads(json_text)
    for part in path.split(".") if path else []:
        value = value[int(part)] if isinstance(value, list) else value[part]
    return json.dumps(value)


def days_between(start: str, end: str) -> int:
    """The number of days from one date to another (YYYY-MM-DD).

    Args:
        start: the first date.
        end: the second date.
    """
    return (dt.date.fromisoformat(end) - dt.date.fromisoformat(start)).days


def add_days(date: str, days: int) -> str:
    """The date a number of days after a date (YYYY-MM-DD; negative days go back).

    Args:
        date: the starting date.
        days: how many days to add.
    """
    return (dt.date.fromisoformat(date) + dt.timedelta(days=days)).isoformat()


def weekday(date: str) -> str:
    """The day of the week of a date (YYYY-MM-DD), e.g. "Monday".

    Args:
        date: the date.
    """
    return dt.date.fromisoformat(date).strftime("%A")


def word_count(text: str) -> int:
    """The number of words in a text.

    Args:
        text: the text.
    """
    return len(text.split())


def reverse_text(text: str) -> str:
    """The text written backwards.

    Args:
        text: the text.
    """
    return text[::-1]


TOOLS = [calculator, json_get, days_between, add_days, weekday, word_count, reverse_text]
