"""Representative calls of every tool go through the executor, whose output validation is strict."""

from __future__ import annotations

import pytest

from echo_tools.egress import EgressPolicy
from echo_tools.executor import ToolExecutor
from tests.agent_tools._files import b64, make_csv, make_pdf
from tests.agent_tools._support import discovered_registry

CALLS = [
    ("tool_calculator", {"operation": "inverse", "matrices": [[[2, 0], [0, 4]]]}),
    ("tool_calculator", {"operation": "evaluate", "expression": "2 ** 10"}),
    ("tool_code_reviewer", {"code": "var x = eval(y);", "language": "javascript", "review_type": "quick"}),
    (
        "tool_code_tester",
        {"code": "def f():\n    return 1\n", "test_code": "def test_f():\n    assert f() == 1\n"},
    ),
    ("tool_code_executor", {"code": "import sys\nsys.exit(2)"}),
    (
        "tool_file_reader",
        {
            "content_base64": b64(make_csv(30)),
            "file_name": "t.csv",
            "mime_type": "text/csv",
            "mode": "summarize",
        },
    ),
    (
        "tool_file_reader",
        {
            "content_base64": b64(make_csv(30)),
            "file_name": "t.csv",
            "mime_type": "text/csv",
            "mode": "query",
            "query": "Oslo",
        },
    ),
    (
        "tool_file_reader",
        {
            "content_base64": b64(make_pdf([["alpha beta"], ["gamma"]])),
            "file_name": "a.pdf",
            "mime_type": "application/pdf",
            "mode": "summarize",
        },
    ),
    (
        "tool_file_reader",
        {
            "content_base64": b64('{"a": 1}'),
            "file_name": "a.json",
            "mime_type": "application/json",
            "mode": "query",
            "query": "zzz",
        },
    ),
    ("tool_datetime", {"operation": "diff", "value": "2025-01-01T00:00:00Z", "end": 1767225600}),
    ("tool_datetime", {"operation": "info", "value": "2025-06-30", "timezone": "America/New_York"}),
    ("tool_json_tools", {"operation": "format", "data": {"b": [1, 2]}, "indent": 0}),
    ("tool_json_tools", {"operation": "keys", "text": '{"x": 1, "y": 2}'}),
    ("tool_text_tools", {"operation": "split", "text": "a\nb", "mode": "lines"}),
    ("tool_text_tools", {"operation": "regex_replace", "text": "a-b", "pattern": "-", "replacement": "+"}),
    ("tool_text_tools", {"operation": "template", "template": "$x!", "variables": {"x": 1}}),
    (
        "tool_code_generator",
        {
            "workflow_json": {
                "name": "w",
                "execution_mode": "parallel",
                "agents": [{"agent_id": "a", "name": "A"}, {"agent_id": "b", "name": "B"}],
            },
            "output_format": "langgraph",
        },
    ),
]


@pytest.fixture(scope="module")
def executor():
    executor = ToolExecutor(discovered_registry(), egress=EgressPolicy.local(), output_validation="error")
    yield executor
    executor.close()


@pytest.mark.parametrize(("tool_id", "data"), CALLS, ids=[f"{t}-{i}" for i, (t, _) in enumerate(CALLS)])
def test_the_output_satisfies_the_tools_output_schema(executor, tool_id, data):
    result = executor.invoke_sync(tool_id, data)
    assert result.success, result.error
    assert result.error_type is None and "output_warnings" not in result.metadata
