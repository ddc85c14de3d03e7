"""Every AgentTool binds as a CrewAI tool and a LangChain tool, and runs through them."""

from __future__ import annotations

import pytest

from echo_tools.executor import ToolExecutor
from tests.agent_tools._support import discovered_registry

# crewai 1.15's own import trips an ImportWarning (crewai.rag refuses an attribute for its child module
# 'embeddings'); binding CrewAI tools imports crewai, so the warning is expected here.
pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")


@pytest.fixture(scope="module")
def bound():
    registry = discovered_registry()
    executor = ToolExecutor(registry)
    yield registry, executor
    executor.close()


def test_every_tool_gets_a_crewai_and_a_langchain_schema_with_its_inputs(bound):
    from workflow_bridge.crewai_tools import to_crewai_tool
    from workflow_bridge.langgraph_tools import to_langchain_tool

    registry, executor = bound
    for tool in registry.list_all():
        crew_tool = to_crewai_tool(tool, executor)
        lc_tool = to_langchain_tool(tool, executor)
        expected = set(tool.input_schema["properties"])
        assert set(crew_tool.args_schema.model_json_schema()["properties"]) == expected, tool.tool_id
        assert set(lc_tool.args) == expected, tool.tool_id


def test_crewai_calls_with_nested_and_multi_type_arguments_run_for_real(bound):
    import json

    from workflow_bridge.crewai_tools import to_crewai_tool

    registry, executor = bound
    tester = to_crewai_tool(registry.require("tool_code_tester"), executor)
    out = json.loads(
        tester.run(
            code="def f(x):\n    return x * 2\n", test_cases=[{"function": "f", "inputs": [2], "expected": 4}]
        )
    )
    assert out["passed"] == 1 and out["success"] is True
    dates = to_crewai_tool(registry.require("tool_datetime"), executor)
    assert json.loads(dates.run(operation="info", value="2024-02-29"))["is_leap_year"] is True
    text = to_crewai_tool(registry.require("tool_text_tools"), executor)
    assert json.loads(text.run(operation="regex_extract", text="a1 b2", pattern=r"\d", group=0))[
        "result"
    ] == ["1", "2"]


async def test_langchain_tools_run_asynchronously(bound):
    from workflow_bridge.langgraph_tools import to_langchain_tool

    registry, executor = bound
    calc = to_langchain_tool(registry.require("tool_calculator"), executor)
    out = await calc.ainvoke({"operation": "evaluate", "expression": "(1 + 2) * 3"})
    assert "9" in str(out)
