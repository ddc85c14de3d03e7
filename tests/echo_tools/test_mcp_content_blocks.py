"""MCP content for the model, end to end with a real server (stdio, and streamable HTTP on 127.0.0.1):
image / audio / resource link / embedded resource blocks through LangChain tools, ExecutorToolNode and
CrewAI tools; progress and log notifications as `tool.progress` / `tool.log` events (and on LangGraph's
custom stream); resources and prompts through the catalogue tools.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from echo_tools import ToolContext, ToolExecutor, ToolRegistry
from echo_tools.events import EVENT_TYPES, MemoryEventLog
from echo_tools.llm_text import text_for_llm
from tests.echo_tools._mcp_support import SERVERS, HttpServer, make_executor, make_registry, stdio_config
from workflow_bridge.crewai_tools import to_crewai_tool
from workflow_bridge.langgraph_tools import ExecutorToolNode, to_langchain_tool

CONTENT = SERVERS / "content_server.py"
sys.path.insert(0, str(SERVERS))
import content_server  # noqa: E402  (the server's own constants: what the model must or must not see)

PNG_B64 = content_server.PNG_B64


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ToolRegistry, ToolExecutor]]:
    registry = make_registry(tmp_path_factory.mktemp("content"))
    registry.add_mcp_server("content", stdio_config(CONTENT))
    executor = make_executor(registry)
    yield registry, executor
    executor.close()


@pytest.fixture
def log(served: tuple[ToolRegistry, ToolExecutor]) -> Iterator[MemoryEventLog]:
    memory = MemoryEventLog()
    served[1].add_sink(memory)
    yield memory
    served[1].remove_sink(memory)


def test_catalogue_tools_for_resources_and_prompts_are_registered(
    served: tuple[ToolRegistry, ToolExecutor],
) -> None:
    registry, _ = served
    read = registry.get("mcp_content_read_resource")
    prompt = registry.get("mcp_content_get_prompt")
    assert read is not None and prompt is not None
    assert read.execution_config == {"server": "content", "tool": "read_resource", "method": "resources/read"}
    assert prompt.execution_config["method"] == "prompts/get"
    assert read.input_schema["required"] == ["uri"]
    assert read.llm_name == "content_read_resource"


def test_server_without_resources_gets_no_catalogue_tools(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)  # a low-level server declaring tools only
    tools = registry.add_mcp_server("tasks", stdio_config(SERVERS / "tasks_server.py"))
    ids = {t.tool_id for t in tools}
    assert ids and not {"mcp_tasks_read_resource", "mcp_tasks_get_prompt"} & ids
    # FastMCP declares resources and prompts always; with none to offer, no catalogue tool either
    calc = {t.tool_id for t in registry.add_mcp_server("calc", stdio_config())}
    assert "mcp_calc_add" in calc and not {"mcp_calc_read_resource", "mcp_calc_get_prompt"} & calc


async def test_langchain_tool_returns_text_and_image_blocks(
    served: tuple[ToolRegistry, ToolExecutor],
) -> None:
    registry, executor = served
    tool = to_langchain_tool(registry.get("mcp_content_picture"), executor)  # type: ignore[arg-type]
    message = await tool.ainvoke({"type": "tool_call", "id": "c1", "name": tool.name, "args": {}})
    assert isinstance(message, ToolMessage)
    assert message.status == "success"
    text, image = message.content
    assert isinstance(text, dict) and isinstance(image, dict)
    assert text == {"type": "text", "text": "a test card\n[image 1: image/png, 300 KB]"}
    assert image == {"type": "image", "base64": PNG_B64, "mime_type": "image/png"}
    assert message.artifact.metadata["content"][0]["type"] == "image"


def test_langchain_tool_sync_path_gives_the_same_blocks(served: tuple[ToolRegistry, ToolExecutor]) -> None:
    registry, executor = served
    tool = to_langchain_tool(registry.get("mcp_content_picture"), executor)  # type: ignore[arg-type]
    message = tool.invoke({"type": "tool_call", "id": "c2", "name": tool.name, "args": {}})
    assert [block["type"] for block in message.content] == ["text", "image"]


def test_crewai_tool_gets_text_with_each_block_summarised(served: tuple[ToolRegistry, ToolExecutor]) -> None:
    registry, executor = served
    observations = {
        name: to_crewai_tool(registry.get(f"mcp_content_{name}"), executor).run()  # type: ignore[arg-type]
        for name in ("picture", "sound", "link", "embedded")
    }
    assert observations["picture"] == "a test card\n[image 1: image/png, 300 KB]"
    assert observations["sound"] == "[audio 1: audio/wav, 4 KB]"
    assert observations["link"] == (
        "see the readme\n[resource link 1: notes://readme (text/plain, 35 bytes) 'readme'; "
        "read it with the tool content_read_resource]"
    )
    assert observations["embedded"] == (
        "[resource 1: notes://inline, text/plain]\ninline note\n[resource 2: notes://logo, image/png, 300 KB]"
    )
    for text in observations.values():
        assert PNG_B64[:300] not in text and len(text) < 300


def test_resource_link_is_followed_with_the_read_resource_tool(
    served: tuple[ToolRegistry, ToolExecutor], log: MemoryEventLog
) -> None:
    registry, executor = served
    linked = executor.invoke_sync("mcp_content_link", {})
    uri = linked.metadata["content"][0]["uri"]
    read = to_crewai_tool(registry.get("mcp_content_read_resource"), executor).run(uri=uri)  # type: ignore[arg-type]
    assert read == content_server.README
    completed = log.of_type("tool.completed")[-1]
    assert completed.tool_id == "mcp_content_read_resource"
    assert completed.metadata["mcp_resource"] == "notes://readme"


def test_binary_resource_and_template_resource_are_read(served: tuple[ToolRegistry, ToolExecutor]) -> None:
    registry, executor = served
    blob = executor.invoke_sync("mcp_content_read_resource", {"uri": "notes://logo"})
    assert blob.success and blob.output is None
    assert text_for_llm(blob, registry.get("mcp_content_read_resource")) == (
        "[resource 1: notes://logo, image/png, 300 KB]"
    )
    templated = executor.invoke_sync("mcp_content_read_resource", {"uri": "notes://by-name/todo"})
    assert templated.output == "note todo"


def test_unknown_resource_fails_naming_the_uri(served: tuple[ToolRegistry, ToolExecutor]) -> None:
    _, executor = served
    result = executor.invoke_sync("mcp_content_read_resource", {"uri": "notes://nothing-here"})
    assert not result.success
    assert "notes://nothing-here" in (result.error or "")


def test_read_resource_without_uri_is_refused_naming_the_field(
    served: tuple[ToolRegistry, ToolExecutor],
) -> None:
    _, executor = served
    result = executor.invoke_sync("mcp_content_read_resource", {"url": "notes://readme"})
    assert not result.success and result.error_type == "validation"
    assert "uri" in (result.error or "")


def test_prompt_is_got_with_its_arguments(served: tuple[ToolRegistry, ToolExecutor]) -> None:
    _, executor = served
    result = executor.invoke_sync(
        "mcp_content_get_prompt", {"name": "summarise", "arguments": {"topic": "MCP"}}
    )
    assert result.success
    assert result.output["messages"] == [
        {"role": "user", "content": {"type": "text", "text": "Summarise MCP in one sentence."}}
    ]
    missing = executor.invoke_sync("mcp_content_get_prompt", {"name": "no_such_prompt"})
    assert not missing.success and "no_such_prompt" in (missing.error or "")


def test_base64_in_structured_content_is_not_pasted(served: tuple[ToolRegistry, ToolExecutor]) -> None:
    registry, executor = served
    result = executor.invoke_sync("mcp_content_snapshot", {})
    assert result.output["png"] == PNG_B64  # the output keeps the data; only the model's text drops it
    text = text_for_llm(result, registry.get("mcp_content_snapshot"))
    assert text == '{"name": "snap", "png": "[binary data: 409,612 base64 characters omitted]"}'


def test_max_output_chars_bounds_the_text_with_notes(served: tuple[ToolRegistry, ToolExecutor]) -> None:
    registry, executor = served
    tool = registry.get("mcp_content_embedded")
    assert tool is not None
    result = executor.invoke_sync(tool.tool_id, {})
    text = text_for_llm(result, tool.model_copy(update={"max_output_chars": 80}))
    assert len(text) <= 80
    assert "[output truncated:" in text and text.startswith("[resource 1: n\n")


def test_progress_and_log_notifications_become_events_with_the_call_ids(
    served: tuple[ToolRegistry, ToolExecutor], log: MemoryEventLog
) -> None:
    _, executor = served
    assert {"tool.progress", "tool.log"} <= set(EVENT_TYPES)
    context = ToolContext(run_id="run-1", agent_id="agent-1", tool_call_id="call-1")
    result = executor.invoke_sync("mcp_content_slow_job", {"steps": 3}, context)
    assert result.success
    kinds = [e.type for e in log.events]
    assert kinds == ["tool.invoked", "tool.log", *["tool.progress"] * 3, "tool.log", "tool.completed"]
    progress = log.of_type("tool.progress")
    assert [(e.metadata["progress"], e.metadata["total"]) for e in progress] == [(1, 3), (2, 3), (3, 3)]
    assert progress[0].metadata["message"] == "step 1 of 3"
    logs = log.of_type("tool.log")
    assert [(e.metadata["level"], e.metadata["data"]) for e in logs] == [
        ("info", "starting 3 steps"),
        ("warning", "done"),
    ]
    for event in [*progress, *logs]:
        assert (event.run_id, event.agent_id, event.tool_call_id) == ("run-1", "agent-1", "call-1")
        assert event.tool_id == "mcp_content_slow_job" and event.metadata["mcp_server"] == "content"


async def test_executor_tool_node_streams_progress_and_returns_image_blocks(
    served: tuple[ToolRegistry, ToolExecutor],
) -> None:
    registry, executor = served
    node = ExecutorToolNode(registry, executor, ["mcp_content_slow_job", "mcp_content_picture"])
    builder = StateGraph(MessagesState)
    builder.add_node("tools", node)
    builder.add_edge(START, "tools")
    builder.add_edge("tools", END)
    graph = builder.compile()
    calls = [
        {"name": "content_slow_job", "args": {"steps": 2}, "id": "t1"},
        {"name": "content_picture", "args": {}, "id": "t2"},
    ]
    custom: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    async for mode, chunk in graph.astream(
        {"messages": [AIMessage("", tool_calls=calls)]}, stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            custom.append(chunk)
        else:
            final = chunk
    progress = [e for e in custom if e["type"] == "tool.progress"]
    assert [e["metadata"]["progress"] for e in progress] == [1, 2]
    assert {e["tool_call_id"] for e in progress} == {"t1"}
    assert [e["type"] for e in custom if e.get("tool_call_id") == "t1"][-1] == "tool.completed"
    picture = final["messages"][-1]
    assert isinstance(picture, ToolMessage) and picture.tool_call_id == "t2"
    assert picture.content[1] == {"type": "image", "base64": PNG_B64, "mime_type": "image/png"}


def test_over_streamable_http_images_and_progress_reach_the_model(tmp_path: Path) -> None:
    server = HttpServer(CONTENT).start()
    try:
        registry = make_registry(tmp_path)
        registry.add_mcp_server("web", {"url": server.url})
        executor = make_executor(registry)
        memory = MemoryEventLog()
        executor.add_sink(memory)
        try:
            tool = to_langchain_tool(registry.get("mcp_web_picture"), executor)  # type: ignore[arg-type]
            message = tool.invoke({"type": "tool_call", "id": "h1", "name": tool.name, "args": {}})
            assert message.content[1]["base64"] == PNG_B64
            result = executor.invoke_sync("mcp_web_slow_job", {"steps": 2}, ToolContext(run_id="r-http"))
            assert result.output == {"result": "2 steps done"}
            assert [e.metadata["progress"] for e in memory.of_type("tool.progress")] == [1, 2]
            assert [e.metadata["data"] for e in memory.of_type("tool.log")] == ["starting 2 steps", "done"]
            assert {e.run_id for e in memory.of_type("tool.progress")} == {"r-http"}
            read = executor.invoke_sync("mcp_web_read_resource", {"uri": "notes://readme"})
            assert read.output == content_server.README
        finally:
            executor.close()
    finally:
        server.stop()
