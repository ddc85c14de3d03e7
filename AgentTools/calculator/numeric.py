"""Bounded numeric helpers for the calculator: checked results, safe powers, rounding, a safe evaluator.

Every operation that can blow up (a power with a huge exponent, a product of huge integers, an overflow to
infinity) is checked before or right after it runs, so a call fails with a clear `ValueError` instead of
hanging a CPU or returning `inf`.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from typing import Any

MAX_INT_BITS = 4096  # integers beyond ~1233 decimal digits are refused: nobody needs them from a tool
MAX_EXPRESSION_CHARS = 1000
MAX_EXPRESSION_NODES = 400

Number = int | float


def check_number(value: Any, where: str) -> Number:
    """Return `value` when it is a finite int or float within bounds, else raise `ValueError` naming `where`."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(
            f"{where} is not a finite number ({value!r}); the calculation overflowed or is undefined"
        )
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ValueError(f"{where} is too large: more than {MAX_INT_BITS} bits ({len(str(value))} digits)")
    return value


def safe_power(base: Number, exponent: Number, where: str = "result") -> Number:
    """`base ** exponent`, refusing results that would be huge before computing them."""
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        bits = exponent * math.log2(abs(base))
        if bits > MAX_INT_BITS:
            raise ValueError(
                f"{where}: {base!r} ** {exponent!r} has about {int(bits)} bits, more than the {MAX_INT_BITS} "
                "allowed; use smaller numbers or floats"
            )
    if base == 0 and exponent < 0:
        raise ValueError(f"{where}: 0 cannot be raised to a negative power ({exponent!r})")
    try:
        result = base**exponent
    except OverflowError as exc:
        raise ValueError(f"{where}: {base!r} ** {exponent!r} overflows a float") from exc
    if isinstance(result, complex):
        raise ValueError(f"{where}: {base!r} ** {exponent!r} is not a real number")
    return check_number(result, where)


def round_value(value: Any, precision: int | None, rounding: str) -> Any:
    """Round every float in `value` (a number or nested lists) to `precision` places with `rounding`."""
    if isinstance(value, list):
        return [round_value(v, precision, rounding) for v in value]
    if not isinstance(value, float) or precision is None or rounding == "none":
        return value
    if rounding == "round":
        return round(value, precision)
    scale = 10.0**precision
    scaled = value * scale
    if not math.isfinite(scaled):
        return value  # too large to shift; the float already has fewer places than asked
    rounded = math.floor(scaled) if rounding == "floor" else math.ceil(scaled)
    return rounded / scale


def _log(x: Number, base: Number = math.e) -> float:
    if x <= 0:
        raise ValueError(f"log is only defined for positive numbers, got {x!r}")
    if base <= 0 or base == 1:
        raise ValueError(f"log base must be positive and not 1, got {base!r}")
    return math.log(x, base)


def _sqrt(x: Number) -> float:
    if x < 0:
        raise ValueError(f"sqrt is only defined for non-negative numbers, got {x!r}")
    return math.sqrt(x)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "sqrt": _sqrt,
    "exp": math.exp,
    "log": _log,
    "ln": _log,
    "log10": lambda x: _log(x, 10),
    "log2": lambda x: _log(x, 2),
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
    "round": round,
    "min": min,
    "max": max,
    "hypot": math.hypot,
    "radians": math.radians,
    "degrees": math.degrees,
}
CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def evaluate(expression: str) -> Number:
    """Evaluate an arithmetic expression (`2 * (3 + sqrt(16)) ** 2`) without `eval`.

    Numbers, `+ - * / // % **`, parentheses, the names in `CONSTANTS` and calls of `FUNCTIONS` only.
    """
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ValueError(
            f"expression is {len(expression)} characters long; at most {MAX_EXPRESSION_CHARS} are allowed"
        )
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"expression {expression!r} is not valid arithmetic: {exc.msg}") from exc
    if sum(1 for _ in ast.walk(tree)) > MAX_EXPRESSION_NODES:
        raise ValueError(
            f"expression {expression[:60]!r}... is too complex (over {MAX_EXPRESSION_NODES} parts)"
        )
    return check_number(_eval(tree.body, expression), "result")


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def _eval(node: ast.AST, source: str) -> Any:
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.Name) and node.id in CONSTANTS:
        return CONSTANTS[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        operand = _eval(node.operand, source)
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, source), _eval(node.right, source)
        if isinstance(node.op, ast.Pow):
            return safe_power(left, right)
        op = _BINARY.get(type(node.op))
        if op is not None:
            if isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)) and right == 0:
                raise ValueError(f"expression {source!r} divides by zero")
            try:
                return check_number(op(left, right), "result")
            except OverflowError as exc:
                raise ValueError(f"expression {source!r} overflows a float") from exc
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        func = FUNCTIONS.get(node.func.id)
        if func is not None:
            args = [_eval(arg, source) for arg in node.args]
            try:
                return check_number(func(*args), "result")
            except (TypeError, OverflowError, ValueError) as exc:
                raise ValueError(f"expression {source!r}: {node.func.id}() failed: {exc}") from exc
    snippet = ast.get_source_segment(source.replace("^", "**"), node) or type(node).__name__
    allowed = ", ".join(sorted(FUNCTIONS))
    raise ValueError(
        f"expression {source!r} uses {snippet!r}, which is not allowed; use numbers, + - * / // % **, "
        f"parentheses, pi, e, tau and the functions {allowed}"
    )
