"""The protocol's reference server (`@modelcontextprotocol/server-everything`, installed from the npm
registry into a cache folder outside the checkout; the session's `everything` fixture): its image reaches
a LangChain tool as an image block, and its resource links are followed with the catalogue's read-resource
tool.
"""

from __future__ import annotations

from langchain_core.messages import ToolMessage

from echo_tools import ToolExecutor, ToolRegistry
from workflow_bridge.crewai_tools import to_crewai_tool
from workflow_bridge.langgraph_tools import to_langchain_tool


def test_tiny_image_reaches_langchain_as_an_image_block(
    everything: tuple[ToolRegistry, ToolExecutor],
) -> None:
    registry, executor = everything
    tool = to_langchain_tool(registry.get("mcp_everything_get_tiny_image"), executor)  # type: ignore[arg-type]
    message = tool.invoke({"type": "tool_call", "id": "e1", "name": tool.name, "args": {}})
    assert isinstance(message, ToolMessage)
    text, image = message.content
    assert isinstance(text, dict) and isinstance(image, dict)
    assert "[image 1: image/png," in text["text"]
    assert image["type"] == "image" and image["mime_type"] == "image/png"
    assert len(image["base64"]) > 1000 and image["base64"] not in text["text"]


def test_resource_links_are_followed_with_read_resource(
    everything: tuple[ToolRegistry, ToolExecutor],
) -> None:
    registry, executor = everything
    linked = executor.invoke_sync("mcp_everything_get_resource_links", {"count": 2})
    assert linked.success, linked.error
    links = [b for b in linked.metadata["content"] if b["type"] == "resource_link"]
    assert len(links) == 2
    observation = to_crewai_tool(registry.get("mcp_everything_get_resource_links"), executor).run(count=2)  # type: ignore[arg-type]
    assert "[resource link 1: " in observation and "[resource link 2: " in observation
    assert "read it with the tool everything_read_resource" in observation
    read = executor.invoke_sync("mcp_everything_read_resource", {"uri": links[0]["uri"]})
    assert read.success, read.error
    assert read.metadata["mcp_resource"] == links[0]["uri"]
