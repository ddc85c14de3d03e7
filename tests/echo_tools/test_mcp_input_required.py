"""The 2026-07-28 multi-round trip: a server answers a call with `InputRequiredResult`, echo-tools answers
its requests with the call's own handlers (elicitation, sampling, roots) and sends the call again; a graph
pause keeps the server's request state; and bad servers are stopped, named, with nothing kept.

The server (`mcp_servers/asks_v2.py`) is built with the SDK 2.x. Under 1.x echo-tools speaks a 2025
revision to it, which has no `InputRequiredResult`: those tests assert that the server's answer is then a
refusal naming it (what a 1.x client gets), not a hang or a wrong result."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from echo_tools import EgressPolicy, MemoryEventLog, ToolContext, ToolExecutor, ToolRegistry
from echo_tools.compat.mcp import GENERATION
from echo_tools.errors import MCPConnectionError
from echo_tools.mcp.callbacks import elicitation_handler, sampling_llm
from tests.echo_tools._mcp_support import SERVERS, make_registry, stdio_config

ASKS = SERVERS / "asks_v2.py"
LIAR = SERVERS / "liar_server.py"
MODERN = GENERATION >= 2  # echo-tools speaks 2026-07-28 to the 2.x server


def _served(tmp_path: Path, **extra: Any) -> tuple[ToolRegistry, ToolExecutor, MemoryEventLog]:
    registry = make_registry(tmp_path)
    registry.add_mcp_server("asks", {**stdio_config(ASKS), **extra})
    log = MemoryEventLog()
    return registry, ToolExecutor(registry, egress=EgressPolicy.local(), event_sinks=[log]), log


@pytest.fixture
def asks(tmp_path: Path) -> Iterator[tuple[ToolRegistry, ToolExecutor, MemoryEventLog]]:
    registry, executor, log = _served(tmp_path, roots=["/srv/reports"])
    yield registry, executor, log
    executor.close()


def _text(result: Any) -> str:
    assert result.success, result.error
    return str(result.output)


def _refused_under_1x(result: Any) -> None:
    # a 2025-revision session has nowhere for the server to put an InputRequiredResult: its SDK refuses
    assert not result.success and "'asks'" in str(result.error), result


def test_a_server_claiming_a_revision_it_does_not_speak_is_refused_naming_it_and_nothing_is_stored(
    tmp_path: Path,
) -> None:
    registry = make_registry(tmp_path)
    with pytest.raises(MCPConnectionError) as caught:
        registry.add_mcp_server("liar", {"command": sys.executable, "args": [str(LIAR)], "timeout": 30})
    assert "'liar'" in caught.value.message and "2099-01-01" in caught.value.message
    assert "protocol" in caught.value.message
    assert registry.mcp_servers == {} and registry.list_all() == []
    assert not (tmp_path / "tools" / "mcp_servers.json").exists()


def test_the_calls_elicitation_handler_answers_and_the_call_is_sent_again(asks) -> None:
    _, executor, log = asks
    asked: list[dict[str, Any]] = []

    def person(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"date": "2026-12-24"}}

    with elicitation_handler(person):
        result = executor.invoke_sync("mcp_asks_book", {"name": "Ada"})
    if not MODERN:
        return _refused_under_1x(result)
    assert _text(result).startswith("booked Ada on 2026-12-24")
    assert [r["mode"] for r in asked] == ["form"] and asked[0]["schema"]["required"] == ["date"]
    assert [e.metadata["outcome"] for e in log.events if e.type == "tool.elicitation"] == ["accept"]


def test_an_answer_off_the_servers_schema_fails_the_call_naming_the_field(asks) -> None:
    _, executor, _ = asks
    with elicitation_handler(lambda request: {"action": "accept", "content": {"date": 3}}):
        result = executor.invoke_sync("mcp_asks_book", {"name": "Ada"})
    if not MODERN:
        return _refused_under_1x(result)
    assert not result.success and "content.date" in str(result.error) and "'asks'" in str(result.error)


def test_sampling_is_answered_by_the_bound_model_and_refused_without_one(asks) -> None:
    _, executor, log = asks
    without = executor.invoke_sync("mcp_asks_ask_model", {"text": "q3"})
    model = GenericFakeChatModel(messages=iter([AIMessage(content="a summary")]))
    with sampling_llm(model):
        answered = executor.invoke_sync("mcp_asks_ask_model", {"text": "q3"})
    if not MODERN:
        _refused_under_1x(without)
        return _refused_under_1x(answered)
    assert not without.success and "sampling refused: no model is bound" in str(without.error)
    assert "'asks'" in str(without.error)  # over this revision the refusal fails the call, naming the server
    assert answered.output == "model said: a summary"
    assert [e.metadata["outcome"] for e in log.events if e.type == "tool.sampling"] == ["refused", "answered"]


def test_roots_are_answered_from_the_config_and_refused_without_it(asks, tmp_path: Path) -> None:
    _, executor, _ = asks
    listed = executor.invoke_sync("mcp_asks_where", {})
    registry, bare, _ = _served(tmp_path / "bare")
    try:
        refused = bare.invoke_sync("mcp_asks_where", {})
    finally:
        bare.close()
    if not MODERN:
        _refused_under_1x(listed)
        return _refused_under_1x(refused)
    assert listed.output == ["file:///srv/reports"]  # the text is JSON: parsed
    assert not refused.success and "mcpServers.asks.roots" in str(refused.error)


def test_a_server_asking_forever_is_stopped_after_input_rounds_naming_it(tmp_path: Path) -> None:
    _, executor, _ = _served(tmp_path, input_rounds=3)
    asked: list[str] = []
    try:
        with elicitation_handler(lambda request: asked.append(request["message"]) or {"action": "decline"}):
            result = executor.invoke_sync("mcp_asks_forever", {})
    finally:
        executor.close()
    if not MODERN:
        return _refused_under_1x(result)
    assert not result.success and result.output is None
    assert "'asks'" in str(result.error) and "InputRequiredResult 3 times" in str(result.error)
    assert "input_rounds" in str(result.error)
    assert asked == ["Again?"] * 3  # each round answered once, then stopped


def test_a_server_that_is_never_done_is_stopped_by_the_calls_deadline(asks) -> None:
    _, executor, _ = asks
    result = executor.invoke_sync("mcp_asks_stalling", {}, ToolContext(timeout_ms=1500))
    if not MODERN:
        return _refused_under_1x(result)
    assert result.error_type == "timeout" and result.output is None


def test_a_graph_pause_keeps_the_servers_request_state_and_the_resume_does_not_call_afresh(asks) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.types import Command

    from workflow_bridge.langgraph_tools import make_tool_node

    registry, executor, _ = asks
    builder = StateGraph(MessagesState)
    builder.add_node("tools", make_tool_node(registry, executor, ["mcp_asks_book"]))
    builder.add_edge(START, "tools")
    graph = builder.compile(checkpointer=InMemorySaver())
    call = {"name": "asks_book", "args": {"name": "Lin"}, "id": "call_1", "type": "tool_call"}
    config = {"configurable": {"thread_id": "t1"}}
    paused = graph.invoke({"messages": [AIMessage(content="", tool_calls=[call])]}, config)
    if not MODERN:
        assert "__interrupt__" not in paused  # the 2025 revision: the server's refusal is the tool's error
        return
    interrupt = paused["__interrupt__"][0].value
    assert interrupt["type"] == "mcp_elicitation" and interrupt["schema"]["required"] == ["date"]
    assert interrupt["request_state"] == {"request_state": "book-1", "key": "date"}  # the server's, kept
    final = graph.invoke(Command(resume={"action": "accept", "content": {"date": "2027-01-02"}}), config)
    # the server saw one fresh call (before the pause) and one retry with the answer: not called afresh
    assert final["messages"][-1].content == "booked Lin on 2027-01-02; fresh 1, retried 1"


def test_a_listing_is_not_asked_for_again_while_its_cache_hints_say_it_is_fresh(tmp_path: Path) -> None:
    from echo_tools.mcp.listing import forget_listings
    from tests.echo_tools._mcp_support import HttpServer

    server = HttpServer(SERVERS / "cached_v2.py").start()
    registry = make_registry(tmp_path)
    try:
        registry.add_mcp_server("cached", {"url": server.url})
        registry.refresh_mcp_server("cached")  # within the ten minutes the server said the list stays fresh
        executor = ToolExecutor(registry, egress=EgressPolicy.local())
        try:
            asked = executor.invoke_sync("mcp_cached_listed", {}).output
        finally:
            executor.close()
    finally:
        forget_listings("cached")
        server.stop()
    # 2026-07-28 carries the hint: listed once; a 2025 revision has none, so each listing asks again
    assert asked == {"result": 1 if MODERN else 2}


@pytest.mark.parametrize(
    ("key", "value"),
    [("protocol", "2025-06-18"), ("protocol", 3), ("input_rounds", 0), ("input_rounds", True)],
)
def test_a_bad_protocol_or_input_rounds_names_the_field_and_the_value(key: str, value: Any) -> None:
    from echo_tools.errors import ToolConfigError
    from echo_tools.mcp.config import check_server_config

    with pytest.raises(ToolConfigError) as caught:
        check_server_config("asks", {"command": "x", key: value})
    assert caught.value.field == f"mcpServers.asks.{key}" and repr(value) in caught.value.message


def test_a_pinned_modern_revision_is_spoken_without_negotiation_or_refused_under_1x(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    config = {**stdio_config(SERVERS / "calc_v2.py"), "protocol": "2026-07-28"}
    if not MODERN:
        with pytest.raises(MCPConnectionError) as caught:
            registry.add_mcp_server("pinned", config)
        assert "'pinned'" in caught.value.message and "needs the MCP SDK 2.x" in caught.value.message
        assert registry.mcp_servers == {}
        return
    registry.add_mcp_server("pinned", config)
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        assert executor.invoke_sync("mcp_pinned_add", {"a": 1, "b": 2}).output == {"result": 3.0}
    finally:
        executor.close()


def test_a_tool_whose_argument_goes_as_an_mcp_param_header_is_called_after_a_relist(tmp_path: Path) -> None:
    from tests.echo_tools._mcp_support import HttpServer

    server = HttpServer(SERVERS / "calc_v2.py").start()
    registry = make_registry(tmp_path)
    try:
        registry.add_mcp_server("calc", {"url": server.url})  # listed on a short-lived session
        executor = ToolExecutor(registry, egress=EgressPolicy.local())
        try:
            first = executor.invoke_sync("mcp_calc_region", {"place": "Lyon"})
            again = executor.invoke_sync("mcp_calc_region", {"place": "Oslo"})
        finally:
            executor.close()
    finally:
        server.stop()
    # 2026-07-28 HTTP: the first call is refused (-32020, no Mcp-Param-Region header: the pooled session
    # never listed the tool), the session re-lists and sends again; a 2025 revision has no such headers
    assert first.output == {"result": "Lyon (header Lyon)" if MODERN else "Lyon (header -)"}, first.error
    assert again.output == {"result": "Oslo (header Oslo)" if MODERN else "Oslo (header -)"}
