"""The code reviewer: each static check fires on the line it should, in EchoAI's output shape."""

from __future__ import annotations

import json

import pytest

from AgentTools.code_reviewer.checks import complexity
from AgentTools.code_reviewer.service import CodeReviewService
from tests.agent_tools._support import invoke

BAD = """import os, sys
import json
API_KEY = "sk-abcdefghijklmnopqrstuvwx"
password = "hunter2hunter2"

def f(x, items=[]):
    try:
        eval(x)
    except:
        pass
    os.system("ls " + x)
    import subprocess
    subprocess.run(x, shell=True)
    unused = 3
    if x == None:
        return 1
    return items
"""

GOOD = '''"""A tidy module."""


def add(a: int, b: int) -> int:
    """Return the sum of a and b."""
    return a + b
'''


def _codes(result: dict) -> set[tuple[str, int]]:
    return {(i["code"], i["line"]) for i in result["issues"]}


@pytest.fixture(scope="module")
def reviewer() -> CodeReviewService:
    return CodeReviewService()


def test_each_check_reports_the_right_line(reviewer):
    codes = _codes(reviewer.review_code(BAD))
    expected = {
        ("hardcoded-secret", 3),
        ("secret-literal", 3),
        ("hardcoded-secret", 4),
        ("mutable-default", 6),
        ("missing-docstring", 6),
        ("dangerous-call", 8),
        ("bare-except", 9),
        ("swallowed-exception", 9),
        ("dangerous-call", 11),
        ("shell-true", 13),
        ("unused-variable", 14),
        ("compare-to-none", 15),
        ("unused-import", 1),
        ("unused-import", 2),
    }
    assert expected <= codes


def test_clean_code_scores_ten_and_has_no_issues(reviewer):
    result = reviewer.review_code(GOOD)
    assert result["issues"] == []
    assert result["summary"]["overall_score"] == 10
    assert result["score"] == 100
    assert "No issues found" in result["review"]


def test_security_findings_pull_the_overall_score_down(reviewer):
    result = reviewer.review_code(BAD)
    assert result["summary"]["security_score"] == 1
    assert result["summary"]["overall_score"] <= 4
    assert all(i["severity"] in ("critical", "warning") for i in result["critical_issues"])
    assert {"category", "severity", "description", "fix"} <= set(result["critical_issues"][0])


def test_a_syntax_error_is_one_critical_issue_with_its_line(reviewer):
    result = reviewer.review_code("x = 1\ndef f(:\n    pass\n")
    assert [(i["code"], i["line"]) for i in result["issues"]] == [("syntax-error", 2)]
    assert result["summary"]["overall_score"] == 1


def test_cyclomatic_complexity_counts_branches_and_boolean_operators(reviewer):
    import ast

    source = "def f(a, b):\n    if a and b:\n        return 1\n    for x in a:\n        if x or b:\n            pass\n    return 0\n"
    assert complexity(ast.parse(source).body[0]) == 6
    branches = "\n".join(f"    if x == {i}:\n        return {i}" for i in range(25))
    result = reviewer.review_code(f'def big(x):\n    """Doc."""\n{branches}\n    return -1\n')
    found = [i for i in result["issues"] if i["code"] == "high-complexity"]
    assert found and found[0]["severity"] == "critical" and "complexity 26" in found[0]["message"]
    assert any(i["code"] == "long-function" for i in result["issues"])


def test_quick_review_keeps_only_critical_and_warning_issues(reviewer):
    result = reviewer.review_code(BAD, review_type="quick")
    assert {i["severity"] for i in result["issues"]} == {"critical", "warning"}


def test_focus_areas_put_that_category_first(reviewer):
    result = reviewer.review_code(BAD, focus_areas="bugs and error handling")
    assert result["issues"][0]["category"] == "bugs"


def test_placeholders_and_environment_lookups_are_not_secrets(reviewer):
    source = 'import os\n"""m"""\npassword = os.environ["PW"]\ntoken = ""\napi_key = "changeme"\n'
    assert not any(i["category"] == "security" for i in reviewer.review_code(source)["issues"])


def test_other_languages_get_line_based_checks(reviewer):
    result = reviewer.review_code(
        "const k = 'AKIAABCDEFGHIJKLMNOP';\neval(userInput);\n", language="javascript"
    )
    codes = _codes(result)
    assert ("secret-literal", 1) in codes and ("dangerous-call", 2) in codes
    assert "line-based rules only" in result["review"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"code": ""}, "code is empty"),
        ({"code": "x", "language": "cobol"}, "language 'cobol' is not supported"),
        ({"code": "x", "review_type": "deep"}, "review_type must be 'comprehensive' or 'quick', got 'deep'"),
        ({"code": "x" * 500_001}, "500001 characters"),
    ],
)
def test_bad_input_names_the_field_and_value(reviewer, kwargs, message):
    with pytest.raises(ValueError) as info:
        reviewer.review_code(**kwargs)
    assert message in str(info.value)


def test_the_output_satisfies_echoais_output_schema_through_the_executor(corpus):
    import jsonschema

    echo_schema = json.loads((corpus / "manifests" / "code_reviewer.json").read_text())["output_schema"]
    result = invoke("tool_code_reviewer", {"code": BAD, "focus_areas": None})
    assert result.success, result.error
    jsonschema.validate(result.output, echo_schema)
    assert result.output["language"] == "python"
