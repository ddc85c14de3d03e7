"""A safe evaluator for the branch conditions of Conditional nodes (`risk_score > 70 AND deal_size < 5e6`).

The expression is parsed with `ast` and walked over a small whitelist: comparisons, and/or/not (also the
words AND/OR/NOT), numbers, strings, state key names, + - * / % on numbers and `len()`. There is no `eval`,
no attribute access, no subscripts and no other calls, and the expression size is bounded.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable, Mapping
from typing import Any

MAX_EXPRESSION_CHARS = 1000
MAX_NODES = 200
MAX_STRING_CHARS = 10_000

_WORD_OPERATORS = re.compile(r"\b(AND|OR|NOT)\b")
_STRING_LITERAL = re.compile(r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")")
_NUMBER_IN_TEXT = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
_LITERAL_NAMES = {"true": True, "false": False, "none": None, "null": None}

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}
_ARITHMETIC: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Mod: operator.mod,
}
_FUNCTIONS: dict[str, Callable[[Any], Any]] = {"len": len}


class ConditionError(ValueError):
    """A branch condition that is not in the allowed expression language."""


class ConditionVariableError(ConditionError):
    """A branch condition names a variable the state does not have (raised when evaluating strictly)."""

    def __init__(self, message: str, variable: str, expression: str) -> None:
        super().__init__(message)
        self.variable = variable
        self.expression = expression


def _normalise(expression: str) -> str:
    # Upper-case AND/OR/NOT (EchoAI's reference canvases) become Python's words; string literals keep them.
    parts = _STRING_LITERAL.split(expression)
    for i in range(0, len(parts), 2):
        parts[i] = _WORD_OPERATORS.sub(lambda m: m.group(1).lower(), parts[i])
        parts[i] = parts[i].replace("&&", " and ").replace("||", " or ")
    return "".join(parts)


def parse_condition(expression: str) -> ast.Expression:
    """Parse and check `expression`; raises `ConditionError` naming it when it is not allowed."""
    if not isinstance(expression, str):
        raise ConditionError(f"condition must be a string, got {expression!r}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ConditionError(
            f"condition is {len(expression)} characters long; at most {MAX_EXPRESSION_CHARS} are allowed"
        )
    try:
        tree = ast.parse(_normalise(expression).strip(), mode="eval")
    except SyntaxError as exc:
        raise ConditionError(f"condition {expression!r} is not a valid expression: {exc.msg}") from exc
    count = 0
    for node in ast.walk(tree):
        count += 1
        if count > MAX_NODES:
            raise ConditionError(f"condition {expression!r} is too large (more than {MAX_NODES} parts)")
        _check_node(node, expression)
    return tree


def _check_node(node: ast.AST, expression: str) -> None:
    allowed = (
        ast.Expression,
        ast.BoolOp,
        ast.And,
        ast.Or,
        ast.UnaryOp,
        ast.Not,
        ast.USub,
        ast.UAdd,
        ast.Compare,
        ast.BinOp,
        ast.Constant,
        ast.Name,
        ast.Load,
        ast.Call,
        ast.List,
        ast.Tuple,
        *_COMPARE,
        *_ARITHMETIC,
    )
    if not isinstance(node, allowed):
        raise ConditionError(f"condition {expression!r} uses {type(node).__name__}, which is not allowed")
    if isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCTIONS or node.keywords or len(node.args) != 1:
            allowed_calls = ", ".join(f"{f}(x)" for f in _FUNCTIONS)
            raise ConditionError(f"condition {expression!r} calls something other than {allowed_calls}")
    if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str, bool, type(None))):
        raise ConditionError(f"condition {expression!r} has a constant of type {type(node.value).__name__}")
    if isinstance(node, ast.Name) and node.id.startswith("__"):
        raise ConditionError(f"condition {expression!r} names {node.id!r}, which is not allowed")


def condition_variables(expression: str) -> list[str]:
    """The state keys a condition reads, in order (`win_probability < 30 AND x` -> `win_probability`, `x`).

    The compiler declares them in the state class: LangGraph drops input keys the class does not declare,
    so a variable given only in the run's payload would otherwise never reach the Conditional.

    Raises:
        ConditionError: the expression is not in the allowed language.
    """
    if not expression or not expression.strip():
        return []
    tree = parse_condition(expression)
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    names = sorted(
        (n.col_offset, n.id)
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and id(n) not in called and n.id.lower() not in _LITERAL_NAMES
    )
    return list(dict.fromkeys(name for _, name in names))


def evaluate_condition(expression: str, state: Mapping[str, Any], *, strict: bool = False) -> bool:
    """Evaluate a branch condition against workflow state; an empty condition is true (an `else`).

    Names are state keys; a missing key is None, as EchoAI treated it (its `eval` caught the NameError
    and took the next branch), unless `strict`. Where a number is compared with text, the first number
    in the text is used (EchoAI stores agent output as text, e.g. `"Risk score: 75/100"`).

    Raises:
        ConditionError: the expression is not in the allowed language.
        ConditionVariableError: `strict`, and a name the evaluation reads is not in `state` (nor
            true/false/none/null).
    """
    if expression is None or (isinstance(expression, str) and not expression.strip()):
        return True
    tree = parse_condition(expression)
    return bool(_Evaluator(state, expression, strict).visit(tree.body))


def number_in(value: Any) -> float | None:
    """The number `value` holds or starts with in text (`"75/100"` -> 75.0, `"$500,000"` -> 500000.0)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = _NUMBER_IN_TEXT.search(value)
        if match:
            try:
                return float(match.group(0).replace(",", ""))
            except ValueError:
                return None
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Evaluator:
    def __init__(self, state: Mapping[str, Any], expression: str, strict: bool = False) -> None:
        self.state = state
        self.expression = expression
        self.strict = strict

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(self.visit(v) for v in node.values)
            return any(self.visit(v) for v in node.values)
        if isinstance(node, ast.UnaryOp):
            operand = self.visit(node.operand)
            if isinstance(node.op, ast.Not):
                return not operand
            number = number_in(operand)
            if number is None:
                return None
            return -number if isinstance(node.op, ast.USub) else number
        if isinstance(node, ast.Compare):
            left = self.visit(node.left)
            for op, comparator in zip(node.ops, node.comparators, strict=True):
                right = self.visit(comparator)
                if not self._compare(op, left, right):
                    return False
                left = right
            return True
        if isinstance(node, ast.BinOp):
            return self._arithmetic(node)
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in self.state:
                return self.state[node.id]
            if self.strict and node.id.lower() not in _LITERAL_NAMES:
                raise ConditionVariableError(
                    f"condition {self.expression!r} names {node.id!r}, which the workflow state does not have",
                    node.id,
                    self.expression,
                )
            return _LITERAL_NAMES.get(node.id.lower())
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.visit(e) for e in node.elts]
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name)  # checked by parse_condition
            argument = self.visit(node.args[0])
            try:
                return _FUNCTIONS[node.func.id](argument)
            except TypeError:
                return None
        raise ConditionError(
            f"condition {self.expression!r} uses {type(node).__name__}, which is not allowed"
        )

    def _compare(self, op: ast.cmpop, left: Any, right: Any) -> bool:
        kind = type(op)
        if kind in (ast.Lt, ast.LtE, ast.Gt, ast.GtE) or (
            kind in (ast.Eq, ast.NotEq) and (_is_number(left) or _is_number(right))
        ):
            if _is_number(left) or _is_number(right):
                left_number, right_number = number_in(left), number_in(right)
                if left_number is None or right_number is None:
                    return kind is ast.NotEq
                left, right = left_number, right_number
        if kind in (ast.In, ast.NotIn):
            if isinstance(right, str):
                left = "" if left is None else str(left)
                if kind is ast.In:
                    return left.lower() in right.lower()
                return left.lower() not in right.lower()
            if not isinstance(right, (list, tuple, dict)):
                return kind is ast.NotIn
        if kind in (ast.Eq, ast.NotEq) and isinstance(left, str) and isinstance(right, str):
            equal = left.strip().lower() == right.strip().lower()
            return equal if kind is ast.Eq else not equal
        try:
            return bool(_COMPARE[kind](left, right))
        except TypeError:
            return False

    def _arithmetic(self, node: ast.BinOp) -> Any:
        left, right = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Add) and isinstance(left, str) and isinstance(right, str):
            if len(left) + len(right) > MAX_STRING_CHARS:
                raise ConditionError(f"condition {self.expression!r} builds a string that is too long")
            return left + right
        left_number, right_number = number_in(left), number_in(right)
        if left_number is None or right_number is None:
            return None
        try:
            result = _ARITHMETIC[type(node.op)](left_number, right_number)
        except ZeroDivisionError:
            return None
        return result if math.isfinite(result) else None
