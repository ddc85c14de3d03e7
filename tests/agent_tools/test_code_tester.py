"""The code tester: cases and pytest-style tests run in the sandbox, with per-case results."""

from __future__ import annotations

import pytest

from AgentTools.code_tester.service import CodeTesterService
from tests.agent_tools._support import invoke

CODE = "def add(a, b):\n    return a + b\n\n\ndef div(a, b):\n    return a / b\n"


def test_test_cases_pass_and_fail_with_actual_and_expected_values():
    result = invoke(
        "tool_code_tester",
        {
            "code": CODE,
            "test_cases": [
                {"function": "add", "inputs": [1, 2], "expected": 3},
                {"function": "add", "inputs": {"a": 0.1, "b": 0.2}, "expected": 0.3},
                {"name": "wrong", "function": "add", "inputs": [1, 2], "expected": 4},
                {"function": "div", "inputs": [1, 0], "expect_exception": "ZeroDivisionError"},
                {"function": "missing", "inputs": [], "expected": 1},
            ],
        },
    )
    assert result.success, result.error
    out = result.output
    assert (out["passed"], out["failed"], out["total"], out["success"]) == (3, 2, 5, False)
    by_name = {r["name"]: r for r in out["results"]}
    assert by_name["wrong"] == {**by_name["wrong"], "passed": False, "actual": 3, "expected": 4}
    assert by_name["case_2:add"]["passed"] is True  # 0.1 + 0.2 within the tolerance
    assert "function 'missing' is not defined" in by_name["case_5:missing"]["error"]


def test_pytest_style_functions_see_the_code_and_report_the_failing_assert():
    test_code = (
        "def test_adds():\n    assert add(2, 2) == 4\n\n"
        "def test_message():\n    assert add(2, 2) == 5, 'two and two'\n\n"
        "def test_plain():\n    total = add(1, 1)\n    assert total == 3\n\n"
        "def helper():\n    raise RuntimeError('not a test')\n"
    )
    result = invoke("tool_code_tester", {"code": CODE, "test_code": test_code})
    out = result.output
    assert [r["name"] for r in out["results"]] == ["test_adds", "test_message", "test_plain"]
    assert [r["passed"] for r in out["results"]] == [True, False, False]
    assert out["results"][1]["error"] == "AssertionError: two and two"
    assert out["results"][2]["error"] == "assertion failed: assert total == 3"
    assert out["results"][2]["line"] == 9


def test_all_passing_means_success():
    result = invoke(
        "tool_code_tester",
        {"code": CODE, "test_cases": [{"function": "add", "inputs": ["a", "b"], "expected": "ab"}]},
    )
    assert result.output["success"] is True and result.output["passed"] == 1


def test_code_that_fails_to_import_is_one_failed_result():
    out = invoke("tool_code_tester", {"code": "def f(:\n", "test_code": "def test_x():\n    pass"}).output
    assert out["success"] is False
    assert out["results"][0]["name"] == "<import>" and "SyntaxError" in out["results"][0]["error"]


async def test_a_hanging_case_times_out_and_the_earlier_results_survive():
    code = "def fast():\n    return 1\n\ndef slow():\n    while True:\n        pass\n"
    out = await CodeTesterService().run_tests(
        code,
        test_cases=[
            {"function": "fast", "inputs": [], "expected": 1},
            {"function": "slow", "inputs": [], "expected": 1},
        ],
        timeout_seconds=1,
    )
    assert out["timed_out"] is True and out["success"] is False
    assert out["results"][0] == {**out["results"][0], "name": "case_1:fast", "passed": True}
    assert out["results"][-1]["error"] == "not run: the test run timed out"


async def test_printing_code_under_test_does_not_break_the_results():
    code = "def shout(x):\n    print('LOUD', x)\n    return x.upper()\n"
    out = await CodeTesterService().run_tests(
        code, test_cases=[{"function": "shout", "inputs": ["a"], "expected": "A"}]
    )
    assert out["passed"] == 1
    assert out["results"][0]["stdout"] == "LOUD a\n"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"code": CODE}, "or put doctest examples (>>> lines) in the code"),
        (
            {"code": CODE, "test_cases": [{"function": "os.system", "expected": 1}]},
            "test_cases[0].function must be",
        ),
        (
            {"code": CODE, "test_cases": [{"function": "add", "inputs": 3, "expected": 1}]},
            "test_cases[0].inputs must be",
        ),
        (
            {"code": CODE, "test_cases": [{"function": "add", "inputs": [1, 2]}]},
            "test_cases[0] needs 'expected'",
        ),
        (
            {"code": CODE, "test_code": "def test_x(): pass", "timeout_seconds": 99},
            "timeout_seconds must be in",
        ),
    ],
)
async def test_bad_input_names_the_field(kwargs, message):
    with pytest.raises(ValueError) as info:
        await CodeTesterService().run_tests(**kwargs)
    assert message in str(info.value)


async def test_test_classes_run_each_method_on_a_fresh_instance_with_setup():
    test_code = (
        "class TestAdd:\n"
        "    def setup_method(self, method):\n        self.base = 10\n\n"
        "    def test_base(self):\n        self.base += 1\n        assert add(self.base, 0) == 11\n\n"
        "    def test_fresh(self):\n        assert self.base == 10\n\n"
        "    def helper(self):\n        raise AssertionError('not a test')\n"
    )
    out = await CodeTesterService().run_tests(CODE, test_code=test_code)
    assert [(r["name"], r["passed"]) for r in out["results"]] == [
        ("TestAdd.test_base", True),
        ("TestAdd.test_fresh", True),
    ]


async def test_without_tests_the_doctest_examples_in_the_code_are_run():
    code = (
        'def add(a, b):\n    """Add.\n\n    >>> add(1, 2)\n    3\n    >>> add("a", "b")\n    \'ab\'\n    """\n    return a + b\n\n\n'
        'class Calc:\n    """\n    >>> Calc().sub(3, 1)\n    5\n    """\n\n    def sub(self, a, b):\n        return a - b\n'
    )
    out = await CodeTesterService().run_tests(code)
    assert [(r["name"], r["passed"]) for r in out["results"]] == [
        ("doctest:add", True),
        ("doctest:Calc", False),
    ]
    assert out["results"][0]["examples"] == 2
    assert "Expected:\n    5\nGot:\n    2" in out["results"][1]["error"]
