"""The calculator: EchoAI's operations, the added ones, and clean errors for everything unbounded."""

from __future__ import annotations

import pytest

from AgentTools.calculator.service import OPERATIONS, CalculatorService
from tests.agent_tools._support import discovered_registry


@pytest.fixture(scope="module")
def calc() -> CalculatorService:
    return CalculatorService()


@pytest.mark.parametrize(
    ("operation", "kwargs", "expected"),
    [
        ("add", {"values": [1, 2, 3.5]}, 6.5),
        ("subtract", {"values": [10, 3, 2]}, 5),
        ("multiply", {"values": [2, 3, 4]}, 24),
        ("divide", {"values": [1, 3]}, 0.33),
        ("power", {"values": [2, 10]}, 1024),
        ("mod", {"values": [17, 5]}, 2),
        ("sqrt", {"values": [16]}, 4.0),
        ("abs", {"values": [-3]}, 3),
        ("exp", {"values": [0]}, 1.0),
        ("log", {"values": [8, 2]}, 3.0),
        ("log10", {"values": [1000]}, 3.0),
        ("sum", {"values": [1, 2, 3]}, 6),
        ("product", {"values": [1, 2, 3, 4]}, 24),
        ("mean", {"values": [1, 2, 4]}, 2.33),
        ("median", {"values": [3, 1, 2, 10]}, 2.5),
        ("mode", {"values": [1, 2, 2, 3]}, 2),
        ("variance", {"values": [2, 4, 4, 4, 5, 5, 7, 9]}, 4.0),
        ("stddev", {"values": [2, 4, 4, 4, 5, 5, 7, 9]}, 2.0),
        ("sample_variance", {"values": [1, 2, 3, 4]}, 1.67),
        ("sample_stddev", {"values": [1, 2, 3, 4]}, 1.29),
        ("min", {"values": [3, -1, 2]}, -1),
        ("max", {"values": [3, -1, 2]}, 3),
        ("range", {"values": [3, -1, 2]}, 4),
        ("percentile", {"values": [1, 2, 3, 4], "percentile": 25}, 1.75),
        ("dot", {"vectors": [[1, 2, 3], [4, 5, 6]]}, 32),
        ("vector_add", {"vectors": [[1, 2], [3, 4]]}, [4, 6]),
        ("vector_subtract", {"vectors": [[1, 2], [3, 5]]}, [-2, -3]),
        ("cross", {"vectors": [[1, 0, 0], [0, 1, 0]]}, [0, 0, 1]),
        ("magnitude", {"vectors": [[3, 4]]}, 5.0),
        ("normalize", {"vectors": [[3, 4]]}, [0.6, 0.8]),
        ("scalar_multiply", {"values": [2], "vectors": [[1, 2]]}, [2, 4]),
        ("matrix_add", {"matrices": [[[1, 2], [3, 4]], [[1, 1], [1, 1]]]}, [[2, 3], [4, 5]]),
        ("matrix_subtract", {"matrices": [[[1, 2], [3, 4]], [[1, 1], [1, 1]]]}, [[0, 1], [2, 3]]),
        ("matrix_multiply", {"matrices": [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]}, [[19, 22], [43, 50]]),
        ("transpose", {"matrices": [[[1, 2, 3], [4, 5, 6]]]}, [[1, 4], [2, 5], [3, 6]]),
        ("determinant", {"matrices": [[[4, 7], [2, 6]]]}, 10.0),
        ("inverse", {"matrices": [[[4, 7], [2, 6]]]}, [[0.6, -0.7], [-0.2, 0.4]]),
        ("evaluate", {"expression": "2 * (3 + sqrt(16)) ^ 2"}, 98.0),
    ],
)
def test_each_operation_computes_the_expected_result(calc, operation, kwargs, expected):
    assert calc.calculate(operation, **kwargs) == {"operation": operation, "result": expected}


def test_every_operation_of_the_manifest_enum_is_implemented():
    tool = discovered_registry().require("tool_calculator")
    assert set(tool.input_schema["properties"]["operation"]["enum"]) == set(OPERATIONS)


@pytest.mark.parametrize(
    ("rounding", "precision", "expected"),
    [("round", 2, 3.14), ("floor", 3, 3.141), ("ceil", 1, 3.2), ("none", 2, 3.14159)],
)
def test_precision_and_rounding_apply_to_float_results(calc, rounding, precision, expected):
    result = calc.calculate("add", values=[3.14159], precision=precision, rounding=rounding)
    assert result["result"] == expected


@pytest.mark.parametrize(
    ("operation", "kwargs", "message"),
    [
        ("power", {"values": [10, 10, 10_000_000]}, "bits"),
        ("power", {"values": [10.0, 400]}, "overflows"),
        ("evaluate", {"expression": "9 ** 9 ** 9"}, "bits"),
        ("exp", {"values": [1000]}, "overflows"),
        ("divide", {"values": [1, 0]}, "division by zero: 1 / 0"),
        ("mod", {"values": [1, 0]}, "modulo by zero"),
        ("sqrt", {"values": [-4]}, "values[0] = -4"),
        ("log", {"values": [0]}, "values[0] = 0"),
        ("divide", {"values": [1]}, "at least 2"),
        ("dot", {"vectors": [[1, 2], [1, 2, 3]]}, "same length"),
        ("matrix_multiply", {"matrices": [[[1, 2]], [[1, 2]]]}, "columns == matrices[1] rows"),
        ("matrix_add", {"matrices": [[[1, 2], [3]], [[1, 2], [3, 4]]]}, "matrices[0][1] has 1 columns"),
        ("inverse", {"matrices": [[[1, 2], [2, 4]]]}, "singular"),
        ("evaluate", {"expression": "__import__('os').system('id')"}, "not allowed"),
        ("evaluate", {"expression": "1 +"}, "not valid arithmetic"),
        ("evaluate", {}, "needs expression"),
        ("percentile", {"values": [1], "percentile": 101}, "101"),
    ],
)
def test_bad_or_unbounded_input_is_a_clear_value_error(calc, operation, kwargs, message):
    with pytest.raises(ValueError) as info:
        calc.calculate(operation, **kwargs)
    assert message in str(info.value)


def test_huge_matrices_are_refused_before_any_work(calc):
    big = [[1] * 600 for _ in range(600)]
    with pytest.raises(ValueError, match=r"matrices\[0\] is 600x600"):
        calc.calculate("matrix_multiply", matrices=[big, big])
    wide = [[1] * 400 for _ in range(400)]
    with pytest.raises(ValueError, match="too large"):
        calc.calculate("matrix_multiply", matrices=[wide, wide])


def test_huge_integer_products_are_refused(calc):
    with pytest.raises(ValueError, match="too large"):
        calc.calculate("multiply", values=[10**1000, 10**1000, 10**1000, 10**1000, 10**1000])


def test_unknown_operation_and_bad_precision_name_the_value(calc):
    with pytest.raises(ValueError, match="operation 'cube' is unknown"):
        calc.calculate("cube", values=[2])
    with pytest.raises(ValueError, match="precision must be between -15 and 15, got 99"):
        calc.calculate("add", values=[1], precision=99)


def test_non_numbers_in_values_are_named(calc):
    with pytest.raises(ValueError, match=r"values\[1\] must be a number, got 'x'"):
        calc.calculate("add", values=[1, "x"])


def test_calls_through_the_executor_apply_defaults_and_drop_nones():
    from tests.agent_tools._support import invoke

    # CrewAI sends every optional field, unset ones as None; EchoAI's calculator failed on exactly this
    result = invoke(
        "tool_calculator",
        {"operation": "mean", "values": [1, 2, 4], "vectors": None, "matrices": None, "precision": None},
    )
    assert result.success, result.error
    assert result.output == {"operation": "mean", "result": 2.33}
    failed = invoke("Calculator", {"operation": "divide", "values": [1, 0]})
    assert (
        not failed.success and failed.error_type == "execution" and "division by zero: 1 / 0" in failed.error
    )
    invalid = invoke("calculator", {"operation": "add", "values": [1, "x"]})
    assert not invalid.success and invalid.error_type == "validation" and "values[1]" in invalid.error
