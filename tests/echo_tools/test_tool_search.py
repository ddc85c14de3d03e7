"""Ranked tool search (`ToolRegistry.search(query, k=...)`) and the `search_tools` tool agents call."""

from __future__ import annotations

import pytest

from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry, builtin_tools_dir, search_tools_tool
from echo_tools.errors import ToolValidationError
from echo_tools.tool_search import MAX_QUERY_CHARS, stem, terms


def catalogue() -> ToolRegistry:
    registry = ToolRegistry()
    mcp = {"tool_type": "mcp", "execution_config": {"server": "s", "tool": "t"}}
    registry.register(
        {"name": "convert_currency", "description": "Convert an amount between currencies.", **mcp}
    )
    registry.register({"name": "send_email", "description": "Send an email message to a recipient.", **mcp})
    registry.register(
        {
            "name": "pdf_reader",
            "description": "Extract the text of a document.",
            "capabilities": ["read_pdf"],
            **mcp,
        }
    )
    registry.register({"name": "weather", "description": "Today's forecast.", "tags": ["climate"], **mcp})
    return registry


def test_results_are_ranked_by_relevance_over_name_description_tags_and_capabilities():
    registry = catalogue()
    assert [t.name for t in registry.search("send an e-mail message", k=2)][0] == "send_email"
    assert [t.name for t in registry.search("read pdf files", k=1)] == ["pdf_reader"]  # capabilities
    assert [t.name for t in registry.search("climate", k=3)] == ["weather"]  # tags
    assert [t.name for t in registry.search("currencies conversion", k=1)] == ["convert_currency"]
    assert registry.search("quantum chromodynamics", k=5) == []


def test_a_word_no_tool_has_matches_the_words_it_begins():
    assert [t.name for t in catalogue().search("curr", k=1)] == ["convert_currency"]


def test_k_bounds_the_results_and_the_index_follows_changes():
    registry = catalogue()
    assert len(registry.search("a", k=1)) <= 1
    registry.register({"name": "send_sms", "description": "Send a text message.", "tool_type": "mcp",
                       "execution_config": {"server": "s", "tool": "sms"}})  # fmt: skip
    assert {t.name for t in registry.search("send message", k=2)} == {"send_sms", "send_email"}
    registry.delete("tool_send_sms")
    assert [t.name for t in registry.search("sms", k=2)] == []


def test_search_without_k_keeps_matching_every_word_by_id():
    registry = catalogue()
    assert [t.name for t in registry.search("send EMAIL")] == ["send_email"]
    assert registry.search("send pdf") == []


def test_an_overlong_query_and_a_bad_k_are_refused_naming_the_field():
    registry = catalogue()
    with pytest.raises(ToolValidationError, match=f"more than the {MAX_QUERY_CHARS} allowed") as caught:
        registry.search("x" * (MAX_QUERY_CHARS + 1), k=3)
    assert caught.value.field == "query"
    with pytest.raises(ToolValidationError, match="k must be an integer from 1 to 100, got 0") as caught:
        registry.search("mail", k=0)
    assert caught.value.field == "k"


def test_terms_split_names_and_stem_words():
    assert terms("readPdfFiles and the web_search") == ["read", "pdf", "file", "web", "search"]
    assert [stem(w) for w in ("queries", "running", "emails", "class")] == ["query", "runn", "email", "class"]


def test_an_agent_finds_tools_with_the_search_tool_through_the_executor():
    registry = catalogue()
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log])
    found = search_tools_tool(registry)

    result = executor.invoke_sync(found.tool_id, {"query": "email somebody", "limit": 2})
    assert result.output[0] == {
        "name": "send_email",
        "tool_id": "tool_send_email",
        "description": "Send an email message to a recipient.",
    }
    assert all(
        item["name"] != "search_tools"
        for item in executor.invoke_sync("search_tools", {"query": "search tools"}).output
    )
    too_long = executor.invoke_sync("search_tools", {"query": "y" * 501})
    assert too_long.error_type == "validation" and too_long.error_field == "input.query"
    assert [e.type for e in log.events][:2] == ["tool.invoked", "tool.completed"]


def test_every_shipped_tool_declares_capabilities():
    registry = ToolRegistry()
    tools = registry.discover_local_tools([builtin_tools_dir()])
    assert tools and all(t.capabilities for t in tools), [t.tool_id for t in tools if not t.capabilities]
