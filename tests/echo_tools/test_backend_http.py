"""The `api` backend against a real aiohttp server on 127.0.0.1 started by the test module."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor
from tests.echo_tools._executor_support import LocalHttpServer, api_tool, make_executor, make_registry


@pytest.fixture(scope="module")
def server() -> Iterator[LocalHttpServer]:
    running = LocalHttpServer().start()
    yield running
    running.stop()


@pytest.fixture
async def run(server: LocalHttpServer) -> AsyncIterator:
    """`await run(tool_dict, input)` -> ToolResult, on an executor allowed to reach loopback."""
    executors: list[ToolExecutor] = []

    async def invoke(tool: dict, data: dict | None = None, **kwargs: object):  # noqa: ANN202
        executor, log = make_executor(tool, **kwargs)
        executors.append(executor)
        result = await executor.invoke(tool["name"], data or {})
        result.metadata["events"] = log.events
        return result

    yield invoke
    for executor in executors:
        await executor.aclose()


async def test_post_sends_the_input_as_json_body(server: LocalHttpServer, run) -> None:
    result = await run(api_tool("echo", f"{server.base}/echo"), {"q": "tea", "n": 2})
    assert result.success and result.output["method"] == "POST"
    assert result.output["json"] == {"q": "tea", "n": 2}
    assert result.metadata["status"] == 200


async def test_get_sends_the_input_as_query_with_the_fixed_query(server: LocalHttpServer, run) -> None:
    tool = api_tool("echo", f"{server.base}/echo", config={"method": "get", "query": {"lang": "en"}})
    result = await run(tool, {"q": "tea", "n": 2})
    assert result.output["method"] == "GET" and result.output["json"] is None
    assert result.output["query"] == {"lang": "en", "q": "tea", "n": "2"}


async def test_url_placeholders_are_filled_quoted_and_removed_from_the_input(
    server: LocalHttpServer, run
) -> None:
    tool = api_tool("item", f"{server.base}/items/{{item_id}}", config={"method": "GET"})
    result = await run(tool, {"item_id": "a b/c", "extra": "x"})
    assert result.output == {"id": "a b/c", "query": {"extra": "x"}}


async def test_missing_placeholder_value_is_a_validation_error_naming_it(
    server: LocalHttpServer, run
) -> None:
    tool = api_tool("item", f"{server.base}/items/{{item_id}}", config={"method": "GET"})
    result = await run(tool, {})
    assert result.error_type == "validation" and "input.item_id" in result.error


async def test_text_responses_are_returned_as_text(server: LocalHttpServer, run) -> None:
    result = await run(api_tool("text", f"{server.base}/text", config={"method": "GET"}))
    assert result.output == "plain hello"


async def test_env_references_in_headers_are_resolved_at_call_time_and_never_stored(
    server: LocalHttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = api_tool(
        "echo",
        f"{server.base}/echo",
        config={"headers": {"Authorization": "Bearer ${ECHO_TEST_TOKEN}", "X-Plain": "p"}},
    )
    executor, log = make_executor(tool)
    monkeypatch.setenv("ECHO_TEST_TOKEN", "first")
    first = await executor.invoke("echo", {"api_key": "k-123"})
    monkeypatch.setenv("ECHO_TEST_TOKEN", "second")
    second = await executor.invoke("echo", {})
    await executor.aclose()
    assert first.output["headers"]["authorization"] == "Bearer first"
    assert second.output["headers"]["authorization"] == "Bearer second"
    stored = executor.registry.get("tool_echo").execution_config["headers"]
    assert stored["Authorization"] == "Bearer ${ECHO_TEST_TOKEN}"
    invoked = log.of_type("tool.invoked")[0]
    assert invoked.input == {"api_key": "***"}
    assert "first" not in str([e.to_dict() for e in log.events])


async def test_a_missing_env_variable_fails_naming_the_header_and_variable(
    server: LocalHttpServer, run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ECHO_TEST_MISSING", raising=False)
    tool = api_tool("echo", f"{server.base}/echo", config={"headers": {"X-Key": "${ECHO_TEST_MISSING}"}})
    result = await run(tool)
    assert (
        result.error_type == "execution"
        and "'X-Key'" in result.error
        and "'ECHO_TEST_MISSING'" in result.error
    )


async def test_http_500_is_a_failure_with_the_status_and_the_start_of_the_body(
    server: LocalHttpServer, run
) -> None:
    result = await run(api_tool("fail", f"{server.base}/fail", config={"method": "GET"}))
    assert result.error_type == "execution"
    assert "HTTP 500" in result.error and "database exploded" in result.error
    assert len(result.error) < 800


async def test_slow_endpoint_times_out_and_the_server_sees_the_request_dropped(
    server: LocalHttpServer, run
) -> None:
    server.slow_cancelled.clear()
    result = await run(api_tool("slow", f"{server.base}/slow", config={"method": "GET"}, timeout_ms=1000))
    assert result.error_type == "timeout"
    assert [e.type for e in result.metadata["events"]] == ["tool.invoked", "tool.timeout"]
    assert await asyncio.to_thread(server.slow_cancelled.wait, 5)


async def test_huge_response_is_cut_at_the_response_size_limit(server: LocalHttpServer) -> None:
    registry = make_registry(api_tool("huge", f"{server.base}/huge", config={"method": "GET"}))
    executor = ToolExecutor(registry, egress=EgressPolicy(allow_loopback=True, max_response_bytes=256 * 1024))
    result = await executor.invoke("huge", {})
    await executor.aclose()
    assert result.error_type == "execution" and "262144 bytes" in result.error


async def test_redirect_to_the_metadata_address_is_refused(server: LocalHttpServer, run) -> None:
    result = await run(api_tool("meta", f"{server.base}/redirect/metadata", config={"method": "GET"}))
    assert result.error_type == "execution"
    assert "169.254.169.254" in result.error and "link-local" in result.error


async def test_redirect_within_the_policy_is_followed(server: LocalHttpServer, run) -> None:
    result = await run(api_tool("ok", f"{server.base}/redirect/ok", config={"method": "GET"}))
    assert result.success and result.output["query"] == {"via": "redirect"}


async def test_redirect_loop_stops_after_five_hops(server: LocalHttpServer, run) -> None:
    result = await run(api_tool("loop", f"{server.base}/redirect/loop", config={"method": "GET"}))
    assert result.error_type == "execution" and "more than 5 redirects" in result.error


async def test_default_policy_refuses_loopback(server: LocalHttpServer) -> None:
    registry = make_registry(api_tool("echo", f"{server.base}/echo"))
    log = MemoryEventLog()
    executor = ToolExecutor(registry, [log])  # default EgressPolicy(): loopback denied
    result = await executor.invoke("echo", {"q": 1})
    await executor.aclose()
    assert result.error_type == "execution" and "127.0.0.1" in result.error and "loopback" in result.error
    assert result.attempts == 1


async def test_one_shared_client_per_loop_is_reused_across_calls(server: LocalHttpServer) -> None:
    executor, _ = make_executor(api_tool("echo", f"{server.base}/echo"))
    first = executor.backend_for("api").client()
    await executor.invoke("echo", {})
    await executor.invoke("echo", {})
    assert executor.backend_for("api").client() is first and isinstance(first, httpx.AsyncClient)
    await executor.aclose()
    assert first.is_closed


def test_invoke_sync_runs_api_tools_on_the_background_loop(server: LocalHttpServer) -> None:
    executor, _ = make_executor(api_tool("echo", f"{server.base}/echo"))
    results = [executor.invoke_sync("echo", {"i": i}) for i in range(3)]
    assert [r.output["json"] for r in results] == [{"i": 0}, {"i": 1}, {"i": 2}]
    executor.close()


async def test_fifty_concurrent_calls_all_succeed(server: LocalHttpServer) -> None:
    executor, log = make_executor(api_tool("echo", f"{server.base}/echo"))
    results = await asyncio.gather(*(executor.invoke("echo", {"i": i}) for i in range(50)))
    await executor.aclose()
    assert sorted(r.output["json"]["i"] for r in results) == list(range(50))
    assert len(log.of_type("tool.completed")) == 50


async def test_a_declared_content_length_over_the_limit_is_refused_before_reading(
    server: LocalHttpServer,
) -> None:
    registry = make_registry(api_tool("big", f"{server.base}/big", config={"method": "GET"}))
    executor = ToolExecutor(registry, egress=EgressPolicy(allow_loopback=True, max_response_bytes=100 * 1024))
    result = await executor.invoke("big", {})
    await executor.aclose()
    assert result.error_type == "execution" and "307200 bytes exceeds the limit of 102400" in result.error


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH"])
async def test_other_methods_send_query_or_body_as_documented(
    server: LocalHttpServer, run, method: str
) -> None:
    result = await run(api_tool("echo", f"{server.base}/echo", config={"method": method}), {"k": "v"})
    assert result.output["method"] == method
    if method == "DELETE":
        assert result.output["query"] == {"k": "v"} and result.output["json"] is None
    else:
        assert result.output["json"] == {"k": "v"}


async def test_replacing_the_executors_egress_policy_takes_effect_at_once(server: LocalHttpServer) -> None:
    executor, _ = make_executor(api_tool("echo", f"{server.base}/echo"))
    assert (await executor.invoke("echo", {})).success
    executor.egress = EgressPolicy()  # loopback denied from now on
    refused = await executor.invoke("echo", {})
    await executor.aclose()
    assert refused.error_type == "execution" and "loopback" in refused.error


async def test_charset_of_text_responses_is_honoured(server: LocalHttpServer, run) -> None:
    result = await run(api_tool("latin", f"{server.base}/latin1", config={"method": "GET"}))
    assert result.output == "café"


async def test_a_redirect_to_another_origin_never_receives_secret_headers(
    server: LocalHttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the attack: a tool whose headers carry a server secret follows a redirect to a host its caller controls
    other = LocalHttpServer().start()
    try:
        monkeypatch.setenv("ECHO_TEST_REDIRECT_SECRET", "s3cr3t-value")
        headers = {
            "Authorization": "Bearer ${ECHO_TEST_REDIRECT_SECRET}",
            "X-Api-Key": "literal-key",
            "X-Plain": "p",
        }
        away = api_tool(
            "away",
            f"{server.base}/redirect/to?url={other.base}/echo",
            config={"method": "GET", "headers": headers},
        )
        executor, _ = make_executor(away)
        result = await executor.invoke("away", {})
        await executor.aclose()
        assert result.success, result.error
        seen = result.output["headers"]
        assert "authorization" not in seen and "x-api-key" not in seen
        assert seen["x-plain"] == "p"
        assert "s3cr3t-value" not in str(result.output)

        same = api_tool("same", f"{server.base}/redirect/ok", config={"method": "GET", "headers": headers})
        executor, _ = make_executor(same)
        kept = await executor.invoke("same", {})
        await executor.aclose()
        assert kept.output["headers"]["authorization"] == "Bearer s3cr3t-value"  # its own origin: kept
    finally:
        other.stop()


@pytest.mark.parametrize("segment", [".", ".."])
async def test_a_dot_segment_cannot_fill_a_url_placeholder(
    server: LocalHttpServer, run, segment: str
) -> None:
    result = await run(
        api_tool("item", f"{server.base}/items/{{item_id}}", config={"method": "GET"}), {"item_id": segment}
    )
    assert result.error_type == "validation"
    assert result.error_field == "input.item_id"
    assert repr(segment) in result.error
