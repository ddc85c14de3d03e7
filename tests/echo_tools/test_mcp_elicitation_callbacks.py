"""`elicitation/create` from real MCP servers (our FastMCP server over stdio and streamable HTTP, and the
reference server-everything): declined with the reason by default, answered by the host's handler, and an
answer that does not match the server's schema never reaches the server as an answer.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from echo_tools import EgressPolicy, MemoryEventLog, ToolContext, ToolExecutor
from echo_tools.compat.mcp import GENERATION
from echo_tools.mcp.callbacks import DECLINED_META, elicitation_handler
from tests.echo_tools._mcp_support import (
    SERVERS,
    make_registry,
)

ASKING = SERVERS / "asking_server.py"


def ask(executor: ToolExecutor, **args: Any) -> dict[str, Any]:
    result = executor.invoke_sync("mcp_asking_ask_contact", args)
    assert result.success, result.error
    return json.loads(result.output["result"])


def elicited(log: MemoryEventLog) -> list[dict]:
    return [e.metadata for e in log.events if e.type == "tool.elicitation"]


def test_by_default_the_server_hears_a_decline_with_the_reason(asking):
    _, executor, log = asking
    answer = ask(executor)
    assert answer["action"] == "decline"
    assert "no person can answer for this call of 'mcp_asking_ask_contact'" in answer["_meta"][DECLINED_META]
    (event,) = elicited(log)
    assert event["outcome"] == "declined" and event["message"] == "Who are you?" and event["mode"] == "form"


def test_the_hosts_handler_sees_the_schema_and_its_answer_reaches_the_server(asking):
    _, executor, log = asking
    asked: list[dict] = []

    def handler(request: dict) -> dict:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Ada", "age": 36}}

    with elicitation_handler(handler):
        answer = ask(executor)
    assert answer == {"action": "accept", "content": {"name": "Ada", "age": 36}}
    (request,) = asked
    assert request["server"] == "asking" and request["tool"] == "mcp_asking_ask_contact"
    assert request["mode"] == "form" and request["message"] == "Who are you?"
    assert request["schema"]["properties"]["age"]["type"] == "integer"
    assert elicited(log)[0]["outcome"] == "accept"


def test_an_async_handler_may_decline(asking):
    _, executor, _ = asking

    async def handler(request: dict) -> dict:
        await asyncio.sleep(0)
        return {"action": "decline"}

    with elicitation_handler(handler):
        assert ask(executor) == {"action": "decline"}


def test_an_answer_not_matching_the_schema_is_an_error_naming_field_and_value(asking):
    _, executor, log = asking
    with elicitation_handler(lambda request: {"action": "accept", "content": {"name": "Ada", "age": "old"}}):
        answer = ask(executor)
    assert "does not match the server's schema" in answer["error"]
    assert 'content.age: "old" is not of type "integer"' in answer["error"]
    assert elicited(log)[0]["outcome"] == "invalid"


def test_a_missing_required_field_and_a_bad_action_are_named(asking):
    _, executor, _ = asking
    with elicitation_handler(lambda request: {"action": "accept", "content": {"age": 3}}):
        assert '"name" is a required property' in ask(executor)["error"]
    with elicitation_handler(lambda request: {"action": "sure"}):
        assert "'action' must be 'accept', 'decline' or 'cancel', got 'sure'" in ask(executor)["error"]


def test_a_failing_handler_declines_with_its_error(asking):
    _, executor, _ = asking

    def handler(request: dict) -> dict:
        raise RuntimeError("the form service is down")

    with elicitation_handler(handler):
        answer = ask(executor)
    assert answer["action"] == "decline"
    assert "RuntimeError: the form service is down" in answer["_meta"][DECLINED_META]


def test_a_url_elicitation_reaches_the_handler_with_its_url(asking):
    _, executor, _ = asking
    asked: list[dict] = []
    with elicitation_handler(lambda request: asked.append(request) or {"action": "accept"}):
        answer = ask(executor, url="https://login.example/start")
    assert answer == {"action": "accept"}
    assert asked[0]["mode"] == "url" and asked[0]["url"] == "https://login.example/start"
    assert "schema" not in asked[0]


@pytest.mark.slow
def test_elicitation_over_streamable_http(tmp_path, asking_http):
    registry = make_registry(tmp_path)
    registry.add_mcp_server("asking", {"url": asking_http.url})
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        with elicitation_handler(lambda request: {"action": "accept", "content": {"name": "Bo"}}):
            answer = ask(executor)
    finally:
        executor.close()
    assert answer == {"action": "accept", "content": {"name": "Bo"}}


@pytest.mark.slow
def test_server_everything_offers_and_runs_its_elicitation_tool(everything):
    registry, executor = everything
    assert {"mcp_everything_trigger_elicitation_request", "mcp_everything_trigger_url_elicitation"} <= {
        t.tool_id for t in registry.list_by_tags(["mcp_server:everything"])
    }
    content = {"name": "Ada Lovelace", "check": True, "email": "ada@example.com", "integer": 7}
    declined = executor.invoke_sync("mcp_everything_trigger_elicitation_request", {})
    with elicitation_handler(lambda request: {"action": "accept", "content": content}):
        accepted = executor.invoke_sync("mcp_everything_trigger_elicitation_request", {})
    assert "declined" in json.dumps(declined.output).lower()
    assert "Ada Lovelace" in json.dumps(accepted.output)


@pytest.mark.slow
def test_a_handler_slower_than_the_call_times_the_call_out_and_frees_the_session(asking):
    _, executor, log = asking
    release = threading.Event()

    def slow(request: dict) -> dict:
        release.wait(60)
        return {"action": "accept", "content": {"name": "late"}}

    ask(executor)  # the session is open: the short timeout below is spent waiting for the handler
    try:
        with elicitation_handler(slow):
            late = executor.invoke_sync("mcp_asking_ask_contact", {}, ToolContext(timeout_ms=100))
        after = ask(executor)  # the same session: it answers once the slow handler was given up
    finally:
        release.set()
    assert late.error_type == "timeout"
    assert after["action"] == "decline"
    if GENERATION < 2:  # 1.x answers inside the session's reader: the handler is waited for, then given up
        reasons = [e.get("reason", "") for e in elicited(log)]
        assert any("the handler did not answer within 5.1 s" in r for r in reasons), reasons
