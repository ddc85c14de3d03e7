"""The calculator tool: arithmetic, statistics, vectors, matrices and safe expressions, all bounded.

Keeps EchoAI's `CalculatorService.calculate` entry point and input fields (`operation`, `values`, `vectors`,
`matrices`, `precision`, `rounding`) and adds `expression` (evaluated without `eval`) and a few operations.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any

from AgentTools.calculator.numeric import check_number, evaluate, round_value, safe_power

MAX_VALUES = 100_000
MAX_VECTOR_LEN = 100_000
MAX_MATRIX_CELLS = 250_000
MAX_MATRIX_WORK = 5_000_000  # multiply-adds for one matrix product; ~1 s of pure Python
MAX_INVERSE_SIZE = 200

Matrix = list[list[float]]


def _values(values: Sequence[Any] | None, op: str, at_least: int = 1) -> list[Any]:
    if values is None or len(values) < at_least:
        got = "none" if values is None else len(values)
        raise ValueError(f"operation {op!r} needs values with at least {at_least} number(s), got {got}")
    if len(values) > MAX_VALUES:
        raise ValueError(f"values has {len(values)} numbers; at most {MAX_VALUES} are allowed")
    return [check_number(v, f"values[{i}]") for i, v in enumerate(values)]


def _vectors(
    vectors: Sequence[Sequence[Any]] | None, op: str, count: int, same_length: bool = True
) -> list[list[Any]]:
    if vectors is None or len(vectors) < count:
        got = "none" if vectors is None else len(vectors)
        raise ValueError(f"operation {op!r} needs vectors with {count} vector(s), got {got}")
    out = []
    for i, vector in enumerate(vectors[:count]):
        if not vector:
            raise ValueError(f"vectors[{i}] is empty")
        if len(vector) > MAX_VECTOR_LEN:
            raise ValueError(f"vectors[{i}] has {len(vector)} elements; at most {MAX_VECTOR_LEN} are allowed")
        out.append([check_number(v, f"vectors[{i}][{j}]") for j, v in enumerate(vector)])
    if same_length and len({len(v) for v in out}) > 1:
        lengths = [len(v) for v in out]
        raise ValueError(f"operation {op!r} needs vectors of the same length, got lengths {lengths}")
    return out


def _matrices(matrices: Sequence[Any] | None, op: str, count: int) -> list[Matrix]:
    if matrices is None or len(matrices) < count:
        got = "none" if matrices is None else len(matrices)
        raise ValueError(f"operation {op!r} needs matrices with {count} matrix(es), got {got}")
    out = []
    for i, matrix in enumerate(matrices[:count]):
        if not matrix or not matrix[0]:
            raise ValueError(f"matrices[{i}] is empty")
        width = len(matrix[0])
        if len(matrix) * width > MAX_MATRIX_CELLS:
            raise ValueError(
                f"matrices[{i}] is {len(matrix)}x{width}; at most {MAX_MATRIX_CELLS} cells are allowed"
            )
        for r, row in enumerate(matrix):
            if len(row) != width:
                raise ValueError(f"matrices[{i}][{r}] has {len(row)} columns, but row 0 has {width}")
        out.append(
            [
                [check_number(v, f"matrices[{i}][{r}][{c}]") for c, v in enumerate(row)]
                for r, row in enumerate(matrix)
            ]
        )
    return out


def _sum(numbers: list[Any]) -> Any:
    """Exact for integers, compensated (`math.fsum`) as soon as a float is involved."""
    return math.fsum(numbers) if any(isinstance(x, float) for x in numbers) else sum(numbers)


def _divide(a: Any, b: Any) -> Any:
    if b == 0:
        raise ValueError(f"division by zero: {a!r} / {b!r}")
    return a / b


def _mod(a: Any, b: Any) -> Any:
    if b == 0:
        raise ValueError(f"modulo by zero: {a!r} % {b!r}")
    return a % b


def _checked_reduce(func: Callable[[Any, Any], Any], values: list[Any]) -> Any:
    def step(a: Any, b: Any) -> Any:
        return check_number(func(a, b), "result")

    return reduce(step, values)


def _shape(m: Matrix) -> tuple[int, int]:
    return len(m), len(m[0])


def _matmul(a: Matrix, b: Matrix) -> Matrix:
    (n, k), (k2, p) = _shape(a), _shape(b)
    if k != k2:
        raise ValueError(
            f"matrix_multiply needs matrices[0] columns == matrices[1] rows, got {n}x{k} and {k2}x{p}"
        )
    if n * k * p > MAX_MATRIX_WORK:
        raise ValueError(f"matrix_multiply of {n}x{k} by {k2}x{p} is too large ({n * k * p} multiply-adds)")
    columns = list(zip(*b, strict=True))
    return [
        [check_number(_sum([x * y for x, y in zip(row, col, strict=True)]), "result") for col in columns]
        for row in a
    ]


def _elementwise(pair: list[Matrix], op: str, func: Callable[[Any, Any], Any]) -> Matrix:
    a, b = pair
    if _shape(a) != _shape(b):
        raise ValueError(f"{op} needs matrices of the same shape, got {_shape(a)} and {_shape(b)}")
    return [
        [check_number(func(x, y), "result") for x, y in zip(ra, rb, strict=True)]
        for ra, rb in zip(a, b, strict=True)
    ]


def _lu_solve(m: Matrix, op: str) -> tuple[float, Matrix]:
    """Gauss-Jordan elimination with partial pivoting: (determinant, inverse or [] when singular)."""
    n, cols = _shape(m)
    if n != cols:
        raise ValueError(f"{op} needs a square matrix, got {n}x{cols}")
    if n > MAX_INVERSE_SIZE:
        raise ValueError(f"{op} supports matrices up to {MAX_INVERSE_SIZE}x{MAX_INVERSE_SIZE}, got {n}x{n}")
    a = [[float(x) for x in row] + [1.0 if i == j else 0.0 for j in range(n)] for i, row in enumerate(m)]
    det = 1.0
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-12:
            return 0.0, []
        if pivot != col:
            a[col], a[pivot] = a[pivot], a[col]
            det = -det
        det *= a[col][col]
        inv_p = 1.0 / a[col][col]
        a[col] = [x * inv_p for x in a[col]]
        for r in range(n):
            if r != col and a[r][col] != 0.0:
                factor = a[r][col]
                a[r] = [x - factor * y for x, y in zip(a[r], a[col], strict=True)]
    return check_number(det, "determinant"), [row[n:] for row in a]


class CalculatorService:
    """EchoAI's calculator entry point: `calculate(operation=..., values=[...])`."""

    def calculate(
        self,
        operation: str,
        values: list[Any] | None = None,
        vectors: list[list[Any]] | None = None,
        matrices: list[list[list[Any]]] | None = None,
        precision: int | None = 2,
        rounding: str = "round",
        expression: str | None = None,
        percentile: float | None = None,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Run one operation and return `{operation, result}` rounded as asked.

        Raises:
            ValueError: a missing or malformed operand, an undefined result (division by zero, sqrt of a
                negative number) or a result beyond the bounds (huge powers and matrices, non-finite).
        """
        if precision is not None and not -15 <= precision <= 15:
            raise ValueError(f"precision must be between -15 and 15, got {precision!r}")
        if rounding not in ("round", "floor", "ceil", "none"):
            raise ValueError(f"rounding must be 'round', 'floor', 'ceil' or 'none', got {rounding!r}")
        handler = _OPERATIONS.get(operation)
        if handler is None:
            raise ValueError(f"operation {operation!r} is unknown; expected one of: {', '.join(_OPERATIONS)}")
        args = {
            "values": values,
            "vectors": vectors,
            "matrices": matrices,
            "expression": expression,
            "percentile": percentile,
        }
        result = handler(operation, args)
        return {"operation": operation, "result": round_value(result, precision, rounding)}


def _arith(func: Callable[[Any, Any], Any]) -> Callable[[str, dict[str, Any]], Any]:
    return lambda op, a: _checked_reduce(
        func, _values(a["values"], op, 2 if op in ("divide", "mod", "power") else 1)
    )


def _unary(func: Callable[[Any], Any]) -> Callable[[str, dict[str, Any]], Any]:
    return lambda op, a: evaluate_one(func, op, _values(a["values"], op)[0])


def evaluate_one(func: Callable[[Any], Any], op: str, x: Any) -> Any:
    try:
        return check_number(func(x), "result")
    except OverflowError as exc:
        raise ValueError(f"operation {op!r} on {x!r} overflows a float") from exc


def _sqrt(x: Any) -> float:
    if x < 0:
        raise ValueError(f"sqrt is only defined for non-negative numbers, got values[0] = {x!r}")
    return math.sqrt(x)


def _log(op: str, a: dict[str, Any]) -> float:
    vals = _values(a["values"], op)
    base = 10 if op == "log10" else (vals[1] if len(vals) > 1 else math.e)
    if vals[0] <= 0:
        raise ValueError(f"{op} is only defined for positive numbers, got values[0] = {vals[0]!r}")
    if base <= 0 or base == 1:
        raise ValueError(f"{op} base must be positive and not 1, got values[1] = {base!r}")
    return math.log(vals[0], base)


def _percentile(op: str, a: dict[str, Any]) -> float:
    q = 50.0 if a["percentile"] is None else a["percentile"]
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be between 0 and 100, got {q!r}")
    data = sorted(_values(a["values"], op))
    pos = (len(data) - 1) * q / 100
    low, high = math.floor(pos), math.ceil(pos)
    return data[low] + (data[high] - data[low]) * (pos - low)


def _stat(func: Callable[[list[Any]], Any], at_least: int = 1) -> Callable[[str, dict[str, Any]], Any]:
    def run(op: str, a: dict[str, Any]) -> Any:
        data = _values(a["values"], op, at_least)
        try:
            return check_number(func(data), "result")
        except (OverflowError, statistics.StatisticsError) as exc:
            raise ValueError(f"operation {op!r} failed on these values: {exc}") from exc

    return run


def _vec2(func: Callable[[list[Any], list[Any]], Any]) -> Callable[[str, dict[str, Any]], Any]:
    return lambda op, a: func(*_vectors(a["vectors"], op, 2))


def _cross(u: list[Any], v: list[Any]) -> list[Any]:
    if len(u) != 3:
        raise ValueError(f"cross needs two 3-dimensional vectors, got length {len(u)}")
    return [u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2], u[0] * v[1] - u[1] * v[0]]


def _magnitude(op: str, a: dict[str, Any]) -> float:
    return check_number(math.hypot(*_vectors(a["vectors"], op, 1)[0]), "result")


def _normalize(op: str, a: dict[str, Any]) -> list[float]:
    vector = _vectors(a["vectors"], op, 1)[0]
    norm = math.hypot(*vector)
    if norm == 0:
        raise ValueError("normalize needs a non-zero vector, got vectors[0] of all zeros")
    return [x / norm for x in vector]


def _scalar_multiply(op: str, a: dict[str, Any]) -> Any:
    scalar = _values(a["values"], op)[0]
    if a["matrices"]:
        return [
            [check_number(scalar * x, "result") for x in row] for row in _matrices(a["matrices"], op, 1)[0]
        ]
    return [check_number(scalar * x, "result") for x in _vectors(a["vectors"], op, 1)[0]]


def _determinant(op: str, a: dict[str, Any]) -> float:
    return _lu_solve(_matrices(a["matrices"], op, 1)[0], op)[0]


def _inverse(op: str, a: dict[str, Any]) -> Matrix:
    _det, inverse = _lu_solve(_matrices(a["matrices"], op, 1)[0], op)
    if not inverse:
        raise ValueError("inverse: matrices[0] is singular (its determinant is 0)")
    return [[check_number(x, "result") for x in row] for row in inverse]


def _evaluate(op: str, a: dict[str, Any]) -> Any:
    if not a["expression"]:
        raise ValueError("operation 'evaluate' needs expression, e.g. '2 * (3 + 4) ** 2'")
    return evaluate(a["expression"])


_OPERATIONS: dict[str, Callable[[str, dict[str, Any]], Any]] = {
    "add": _arith(lambda x, y: x + y),
    "subtract": _arith(lambda x, y: x - y),
    "multiply": _arith(lambda x, y: x * y),
    "divide": _arith(_divide),
    "power": _arith(lambda x, y: safe_power(x, y, "power of values")),
    "mod": _arith(_mod),
    "sqrt": _unary(_sqrt),
    "abs": _unary(abs),
    "exp": _unary(math.exp),
    "log": _log,
    "log10": _log,
    "sum": _stat(_sum),
    "product": _arith(lambda x, y: x * y),
    "mean": _stat(statistics.fmean),
    "median": _stat(statistics.median),
    "mode": _stat(statistics.mode),
    "variance": _stat(statistics.pvariance),
    "stddev": _stat(statistics.pstdev),
    "sample_variance": _stat(statistics.variance, 2),
    "sample_stddev": _stat(statistics.stdev, 2),
    "min": _stat(min),
    "max": _stat(max),
    "range": _stat(lambda v: max(v) - min(v)),
    "percentile": _percentile,
    "dot": _vec2(lambda u, v: check_number(_sum([x * y for x, y in zip(u, v, strict=True)]), "result")),
    "vector_add": _vec2(lambda u, v: [check_number(x + y, "result") for x, y in zip(u, v, strict=True)]),
    "vector_subtract": _vec2(lambda u, v: [check_number(x - y, "result") for x, y in zip(u, v, strict=True)]),
    "cross": _vec2(_cross),
    "magnitude": _magnitude,
    "normalize": _normalize,
    "scalar_multiply": _scalar_multiply,
    "matrix_add": lambda op, a: _elementwise(_matrices(a["matrices"], op, 2), op, lambda x, y: x + y),
    "matrix_subtract": lambda op, a: _elementwise(_matrices(a["matrices"], op, 2), op, lambda x, y: x - y),
    "matrix_multiply": lambda op, a: _matmul(*_matrices(a["matrices"], op, 2)),
    "transpose": lambda op, a: [list(col) for col in zip(*_matrices(a["matrices"], op, 1)[0], strict=True)],
    "determinant": _determinant,
    "inverse": _inverse,
    "evaluate": _evaluate,
}

OPERATIONS = tuple(_OPERATIONS)
