"""What a model reads of a tool's output is bounded and never raw binary, through the real CrewAI and
LangChain tool objects (issue 11, finding 10)."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from crewai.tools import BaseTool
    from crewai.tools.tool_failure import ToolFailure

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import BaseTool as LangChainBaseTool

from echo_tools.llm_text import text_for_llm, truncate
from echo_tools.models import ToolResult
from tests.echo_tools._executor_support import local_tool, make_executor
from workflow_bridge.crewai_tools import to_crewai_tool
from workflow_bridge.langgraph_tools import ExecutorToolNode, to_langchain_tool

LONG = local_tool(
    "long text",
    "long_text",
    input_schema={"type": "object", "properties": {"chars": {"type": "integer"}}, "required": ["chars"]},
    max_output_chars=1_000,
)
DEFAULT_BOUND = local_tool(
    "long default",
    "long_text",
    input_schema={"type": "object", "properties": {"chars": {"type": "integer"}}, "required": ["chars"]},
)
SIZE = {"type": "object", "properties": {"size": {"type": "integer"}}, "required": ["size"]}
PICTURE = local_tool("picture", "picture", input_schema=SIZE)
DATA_URI = local_tool("data uri", "data_uri", input_schema=SIZE)
MARKER = "[output truncated: "


def test_a_crewai_tool_cuts_long_output_at_max_output_chars_and_says_how_much() -> None:
    executor, _ = make_executor(LONG)
    tool = to_crewai_tool(executor.registry.get("tool_long_text"), executor)
    assert isinstance(tool, BaseTool)
    text = tool.run(chars=50_000)
    assert isinstance(text, str) and len(text) <= 1_000
    assert text.startswith("lorem ipsum") and MARKER in text
    assert f"of {50_000:,} characters cut (max_output_chars=1,000)" in text
    cut = int(text.split(MARKER)[1].split(" of ")[0].replace(",", ""))
    assert cut == 50_000 - text.index("\n[output truncated")  # what it says was cut is what was cut


def test_the_default_bound_is_twenty_thousand_characters() -> None:
    executor, _ = make_executor(DEFAULT_BOUND)
    tool = to_crewai_tool(executor.registry.get("tool_long_default"), executor)
    text = tool.run(chars=400_069)
    assert len(text) <= 20_000 and "max_output_chars=20,000" in text
    assert tool.run(chars=19_000) == ("lorem ipsum " * 1600)[:19_000]  # short enough: untouched


def test_a_crewai_tool_never_hands_the_model_raw_base64() -> None:
    executor, _ = make_executor(PICTURE, DATA_URI)
    picture = to_crewai_tool(executor.registry.get("tool_picture"), executor)
    text = picture.run(size=300_000)
    assert "a chart" in text and "[image/png data: 400,000 base64 characters omitted]" in text
    assert len(text) < 300
    uri = to_crewai_tool(executor.registry.get("tool_data_uri"), executor).run(size=3_000)
    assert uri == "[image/png data: 4,000 base64 characters omitted]"


def test_a_langchain_tool_bounds_its_content_and_keeps_the_whole_result_as_artifact() -> None:
    executor, _ = make_executor(LONG, PICTURE)
    tool = to_langchain_tool(executor.registry.get("tool_long_text"), executor)
    assert isinstance(tool, LangChainBaseTool)
    call = {"name": tool.name, "args": {"chars": 50_000}, "id": "c1", "type": "tool_call"}
    message = tool.invoke(call)
    assert isinstance(message, ToolMessage) and len(message.content) <= 1_000 and MARKER in message.content
    assert isinstance(message.artifact, ToolResult) and len(message.artifact.output) == 50_000
    image = to_langchain_tool(executor.registry.get("tool_picture"), executor)
    content = image.invoke({"name": image.name, "args": {"size": 300_000}, "id": "c2", "type": "tool_call"})
    assert "base64 characters omitted" in content.content and len(content.content) < 300


async def test_the_executor_tool_node_bounds_every_message() -> None:
    executor, _ = make_executor(LONG, PICTURE)
    node = ExecutorToolNode(executor.registry, executor, ["long text", "picture"])
    calls = [
        {"name": "long_text", "args": {"chars": 50_000}, "id": "c1"},
        {"name": "picture", "args": {"size": 300_000}, "id": "c2"},
    ]
    out = await node.ainvoke({"messages": [AIMessage("", tool_calls=calls)]})
    long_message, picture_message = out["messages"]
    assert len(long_message.content) <= 1_000 and MARKER in long_message.content
    assert "[image/png data: 400,000 base64 characters omitted]" in picture_message.content


def test_a_long_failure_message_is_bounded_too() -> None:
    tool = ToolResult(tool_id="t", name="t", success=False, error="x" * 5_000, error_type="execution")
    text = text_for_llm(tool, max_chars=500)
    assert len(text) <= 500 and text.startswith("Tool 't' failed (execution): xxx") and MARKER in text


@pytest.mark.parametrize("limit", [1, 40, 120, 1_000])
def test_truncation_never_exceeds_the_bound_when_the_marker_fits(limit: int) -> None:
    text = truncate("y" * 10_000, limit)
    assert MARKER in text
    if limit >= 120:
        assert len(text) <= limit


def test_a_crewai_failure_is_still_a_tool_failure_with_the_bounded_text() -> None:
    executor, _ = make_executor(local_tool("boom", "boom", max_output_chars=100))
    tool = to_crewai_tool(executor.registry.get("tool_boom"), executor)
    failure = tool.run(message="m" * 1_000)
    assert isinstance(failure, ToolFailure) and len(failure.message) <= 100 and MARKER in failure.message
