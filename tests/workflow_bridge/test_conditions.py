"""The safe condition evaluator: EchoAI's branch syntax works, anything that could run code is refused."""

from __future__ import annotations

import pytest

from workflow_bridge.conditions import MAX_EXPRESSION_CHARS, ConditionError, evaluate_condition, number_in


@pytest.mark.parametrize(
    ("expression", "state", "expected"),
    [
        ("risk_score > 70", {"risk_score": 75}, True),
        ("risk_score > 70", {"risk_score": "Risk score: 65/100"}, False),
        (
            "win_probability < 30 AND opportunity_value < 500000",
            {"win_probability": 20, "opportunity_value": "$450,000"},
            True,
        ),
        (
            "win_probability < 30 AND opportunity_value < 500000",
            {"win_probability": 20, "opportunity_value": 600000},
            False,
        ),
        ("fit_score >= 80 OR decision == 'hire'", {"fit_score": 10, "decision": "Hire"}, True),
        ("NOT approved", {"approved": False}, True),
        ("not approved and 'urgent' in notes", {"approved": False, "notes": "URGENT: call back"}, True),
        ("len(items) > 2", {"items": [1, 2, 3]}, True),
        ("score * 2 + 1 > 10", {"score": "5"}, True),
        ("missing > 3", {}, False),
        ("missing != 3", {}, True),
        ("status == 'AND OR'", {"status": "and or"}, True),
        ("", {}, True),
        ("10 > x > 5", {"x": 7}, True),
        ("x == true", {"x": True}, True),
    ],
)
def test_conditions_evaluate_against_state(expression, state, expected):
    assert evaluate_condition(expression, state) is expected


@pytest.mark.parametrize(
    "expression",
    [
        "().__class__.__base__.__subclasses__()",
        "__import__('os').system('id')",
        "open('/etc/passwd')",
        "state.risk_score > 1",
        "x[0] > 1",
        "lambda: 1",
        "[c for c in 'abc']",
        "2 ** 1000000",
        "x := 3",
        "__builtins__",
    ],
)
def test_anything_beyond_the_whitelist_is_refused_naming_the_expression(expression):
    with pytest.raises(ConditionError) as info:
        evaluate_condition(expression, {"x": 1, "state": {}})
    assert repr(expression) in str(info.value) or "not a valid expression" in str(info.value)


def test_expression_size_is_bounded():
    with pytest.raises(ConditionError, match="characters long"):
        evaluate_condition("x > 1 and " * (MAX_EXPRESSION_CHARS // 10 + 1) + "x > 1", {"x": 2})
    with pytest.raises(ConditionError, match="too large"):
        evaluate_condition(" + ".join(["1"] * 150) + " > 0", {})


def test_string_building_is_capped():
    with pytest.raises(ConditionError, match="too long"):
        evaluate_condition("a + a > ''", {"a": "x" * 6000})


def test_numbers_are_read_from_text_as_echoai_stored_it():
    assert number_in("Risk score: 75/100") == 75.0
    assert number_in("$1,250,000.50") == 1250000.5
    assert number_in("none here") is None
    assert number_in(3) == 3.0
