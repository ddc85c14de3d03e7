"""MCP tools over stdio, end to end: a real server subprocess, discovered by the registry and called
through the executor on one pooled session (results, errors, concurrency, timeouts that cancel on the
server, crashes, tool-list changes, servers that never start).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from mcp import types

from echo_tools import MCPConnectionError, ToolContext, ToolExecutor, ToolRegistry, ToolStatus
from echo_tools.backends.mcp import MCPBackend
from echo_tools.mcp.config import register_server
from echo_tools.models import ToolType
from tests.echo_tools._mcp_support import (
    CALC,
    PAGED,
    EventWaiter,
    add_listed_server,
    make_executor,
    make_registry,
    process_alive,
    server_python,
    stdio_config,
    tool_listing,
)


@pytest.fixture(scope="module")
def calc_listing() -> list[types.Tool]:
    """The calc server's tool list, fetched once for the session (each test still gets its own registry and
    sessions; the discovery tests below discover for real)."""
    return tool_listing(CALC)


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory, calc_listing: list[types.Tool]) -> Iterator[ToolExecutor]:
    """One executor (so one calc server process) shared by the tests that only call tools: they neither
    change the registry nor stop the server, and the server state they use (gather keys, sleep markers)
    is named per call by `unique`, so they pass in any order and alone. Tests that crash, kill or
    reconfigure the server get the function-scoped `executor` below."""
    registry = make_registry(tmp_path_factory.mktemp("calls"))
    register_server(registry, "calc", stdio_config(), calc_listing)
    executor = make_executor(registry)
    yield executor
    executor.close()


def unique(prefix: str) -> str:
    """A key for server-side state (`calc_gather`, `calc_sleep` markers) that no other call has used."""
    return f"{prefix}-{uuid.uuid4().hex}"


@pytest.fixture
def registry(tmp_path: Path, calc_listing: list[types.Tool]) -> ToolRegistry:
    registry = make_registry(tmp_path)
    register_server(registry, "calc", stdio_config(), calc_listing)
    return registry


@pytest.fixture
async def executor(registry: ToolRegistry) -> AsyncIterator[ToolExecutor]:
    executor = make_executor(registry)
    yield executor
    await executor.aclose()


def _backend(executor: ToolExecutor) -> MCPBackend:
    backend = executor.backend_for(ToolType.MCP)
    assert isinstance(backend, MCPBackend)
    return backend


# -- discovery -------------------------------------------------------------------------------------


def test_adding_a_server_registers_its_tools_with_schemas(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    tools = registry.add_mcp_server("calc", stdio_config())
    assert {t.tool_id for t in tools} == {t.tool_id for t in registry.list_by_type("mcp")}
    add = registry.get("mcp_calc_add")
    assert add is not None
    assert add.tool_type == ToolType.MCP and add.name == "calc_add"
    assert set(add.input_schema["required"]) == {"a", "b"}
    assert add.output_schema["properties"]["result"]["type"] == "number"
    assert add.side_effect.value == "pure"
    assert registry.resolve("calc_add") is add
    stats = registry.get("mcp_calc_stats")
    assert stats is not None and set(stats.output_schema["required"]) == {"count", "total", "mean"}
    assert stats.side_effect.value == "idempotent"
    assert {t.tool_id for t in registry.list_by_tags(["mcp_server:calc"])} >= {
        "mcp_calc_crash",
        "mcp_calc_sleep",
    }


async def test_a_new_registry_on_the_same_folder_can_call_the_stored_mcp_tools(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    again = make_registry(tmp_path)  # as another process would: tools and server config from storage
    assert again.mcp_servers == {}
    executor = make_executor(again)
    try:
        result = await executor.invoke("calc_add", {"a": 1, "b": 41})
        assert result.output == {"result": 42.0}
        assert again.mcp_servers["calc"]["command"] == server_python(1)
    finally:
        await executor.aclose()


def test_discovery_follows_every_page_of_the_tool_list() -> None:
    registry = make_registry()
    tools = registry.add_mcp_server("paged", stdio_config(PAGED))
    assert len(tools) == 25
    assert registry.get("mcp_paged_plus_24") is not None


# -- calls -----------------------------------------------------------------------------------------


async def test_structured_content_becomes_the_output(calls: ToolExecutor) -> None:
    result = await calls.invoke("calc_add", {"a": 2, "b": 3.5})
    assert result.success, result.error
    assert result.output == {"result": 5.5}
    assert result.metadata["mcp_server"] == "calc"
    stats = await calls.invoke("mcp_calc_stats", {"values": [1, 2, 3]})
    assert stats.output == {"count": 3, "total": 6.0, "mean": 2.0}


async def test_text_content_is_the_output_and_json_text_is_parsed(calls: ToolExecutor) -> None:
    greet = await calls.invoke("calc_greet", {"name": "Ada"})
    assert greet.output == "Hello, Ada!"
    parsed = await calls.invoke("calc_as_json", {"key": "n", "value": 7})
    assert parsed.output == {"n": 7}
    several = await calls.invoke("calc_two_texts", {})
    assert several.output == ["first", 2]


async def test_non_text_content_blocks_are_kept_in_metadata(calls: ToolExecutor) -> None:
    result = await calls.invoke("calc_picture", {})
    assert result.success, result.error
    assert result.output == "a red dot"
    (image,) = result.metadata["content"]
    assert image["type"] == "image" and image["mimeType"] == "image/png"


async def test_an_is_error_result_is_a_failure_with_the_server_message(calls: ToolExecutor) -> None:
    result = await calls.invoke("calc_fail", {"message": "disk on fire"})
    assert not result.success
    assert result.error_type == "execution"
    assert "disk on fire" in (result.error or "") and "'fail'" in (result.error or "")


async def test_input_is_validated_before_the_server_is_asked(calls: ToolExecutor) -> None:
    result = await calls.invoke("calc_add", {"a": "two", "b": 1})
    assert result.error_type == "validation"
    assert "input.a" in (result.error or "") and "two" in (result.error or "")


async def test_twenty_concurrent_calls_share_one_session_and_one_process(calls: ToolExecutor) -> None:
    # `gather` only returns once all 20 calls are inside the same server process at the same time
    key = unique("c20")
    results = await asyncio.gather(
        *(calls.invoke("calc_gather", {"key": key, "count": 20}) for _ in range(20))
    )
    assert all(r.success for r in results), [r.error for r in results if not r.success]
    pids = {r.output["result"] for r in results}
    assert len(pids) == 1
    pid = await calls.invoke("calc_pid", {})
    assert pid.output["result"] in pids
    info = _backend(calls).pool.session_info("calc")
    assert info is not None and info["alive"]


def test_invoke_sync_uses_the_same_pooled_session(calls: ToolExecutor) -> None:
    first = calls.invoke_sync("calc_pid", {})
    second = calls.invoke_sync("calc_pid", {})
    assert first.success and first.output == second.output


def test_calls_from_several_event_loops_share_one_session(calls: ToolExecutor) -> None:
    def pid_in_a_loop_of_its_own(_: int) -> int:
        return asyncio.run(calls.invoke("calc_pid", {})).output["result"]

    with ThreadPoolExecutor(3) as threads:
        pids = list(threads.map(pid_in_a_loop_of_its_own, range(6)))
    pids.append(calls.invoke_sync("calc_pid", {}).output["result"])
    assert len(set(pids)) == 1


# -- timeouts, crashes, lifetime ---------------------------------------------------------------------


async def test_a_timed_out_call_is_cancelled_on_the_server(calls: ToolExecutor) -> None:
    assert (await calls.invoke("calc_pid", {})).success  # the session is open: the deadline hits the call
    marker = unique("t1")
    result = await calls.invoke("calc_sleep", {"seconds": 60, "marker": marker}, ToolContext(timeout_ms=300))
    assert not result.success and result.error_type == "timeout"
    # the server records the cancellation of that sleep; asking it waits at most 10 s
    cancelled = await calls.invoke("calc_wait_cancelled", {"marker": marker, "timeout": 10})
    assert cancelled.success and cancelled.output == {"result": True}


def test_a_timed_out_sync_call_is_cancelled_on_the_server(calls: ToolExecutor) -> None:
    # invoke_sync runs the call on the background loop itself: no hop, the same cancellation
    marker = unique("s1")
    assert calls.invoke_sync("calc_pid", {}).success
    result = calls.invoke_sync("calc_sleep", {"seconds": 60, "marker": marker}, ToolContext(timeout_ms=300))
    assert result.error_type == "timeout"
    cancelled = calls.invoke_sync("calc_wait_cancelled", {"marker": marker, "timeout": 10})
    assert cancelled.output == {"result": True}


@pytest.mark.slow  # three server processes
async def test_a_dead_server_is_replaced_by_a_fresh_process_and_closing_the_executor_ends_it(
    registry: ToolRegistry,
) -> None:
    import os
    import signal

    executor = make_executor(registry)
    try:
        before = (await executor.invoke("calc_pid", {})).output["result"]
        crashed = await executor.invoke("calc_crash", {})
        assert not crashed.success and crashed.error_type == "execution"
        assert "closed the connection" in (crashed.error or "")
        after = await executor.invoke("calc_pid", {})
        assert after.success, after.error
        assert after.output["result"] != before
        assert not process_alive(before)
        # the fresh process dies while no call is in flight: the next call gets another one, transparently
        os.kill(after.output["result"], signal.SIGKILL)
        result = await executor.invoke("calc_add", {"a": 1, "b": 1})
        assert result.success, result.error
        assert result.output == {"result": 2.0}
        last = (await executor.invoke("calc_pid", {})).output["result"]
        assert process_alive(last)
    finally:
        await executor.aclose()
    assert not process_alive(last)


# -- tool-list changes -------------------------------------------------------------------------------


async def test_a_tool_list_change_registers_new_tools_and_disables_vanished_ones(
    registry: ToolRegistry, executor: ToolExecutor
) -> None:
    waiter = EventWaiter()
    registry.events.add(waiter)
    assert registry.get("mcp_calc_new_tool") is None
    changed = await executor.invoke("calc_change_tools", {})
    assert changed.success, changed.error
    assert await asyncio.to_thread(waiter.wait_for, "mcp_calc_new_tool", "mcp_calc_old_tool")
    old = registry.get("mcp_calc_old_tool")
    assert old is not None and old.status == ToolStatus.DISABLED
    doubled = await executor.invoke("calc_new_tool", {"x": 21})
    assert doubled.success and doubled.output == {"result": 42}
    refused = await executor.invoke("calc_old_tool", {})
    assert refused.error_type == "disabled"


def test_refresh_on_demand_sees_the_current_tool_list(registry: ToolRegistry) -> None:
    registry.register(registry.get("mcp_calc_add").model_copy(update={"description": "stale"}))  # type: ignore[union-attr]
    tools = registry.refresh_mcp_server("calc")
    assert "mcp_calc_add" in {t.tool_id for t in tools}
    assert registry.get("mcp_calc_add").description == "Add two numbers."  # type: ignore[union-attr]


# -- servers that never start ------------------------------------------------------------------------


def test_a_server_command_that_does_not_exist_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(MCPConnectionError) as caught:
        make_registry().add_mcp_server("ghost", {"command": str(tmp_path / "missing-binary")})
    assert "'ghost'" in caught.value.message and "missing-binary" in caught.value.message


def test_a_server_that_exits_at_once_fails_with_its_stderr() -> None:
    config = {
        "command": sys.executable,
        "args": ["-c", "import sys; sys.stderr.write('bad token'); sys.exit(2)"],
    }
    with pytest.raises(MCPConnectionError) as caught:
        make_registry().add_mcp_server("quitter", config)
    assert "'quitter'" in caught.value.message and "bad token" in caught.value.message


def test_a_server_that_never_answers_fails_after_its_connect_timeout() -> None:
    # it reads its input to the end and never writes: it answers nothing, and leaves once the client hangs
    # up (a sleeper would hold the client's close for the SDK's 2 s grace before it is killed)
    config = {"command": sys.executable, "args": ["-c", "import sys; sys.stdin.read()"], "timeout": 0.2}
    with pytest.raises(MCPConnectionError) as caught:
        make_registry().add_mcp_server("mute", config)
    assert "did not complete initialize within 0.2 s" in caught.value.message


async def test_a_call_to_a_server_that_cannot_start_is_a_clear_failure(
    registry: ToolRegistry, executor: ToolExecutor, tmp_path: Path
) -> None:
    registry.mcp_servers["calc"] = {"transport": "stdio", "command": str(tmp_path / "gone"), "args": []}
    result = await executor.invoke("calc_add", {"a": 1, "b": 2})
    assert not result.success and result.error_type == "execution"
    assert "cannot start" in (result.error or "") and "gone" in (result.error or "")


@pytest.mark.slow  # a server process and a failed start
async def test_env_references_are_resolved_when_the_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_MCP_TEST_TOKEN", "tok-123")
    registry = make_registry(tmp_path)
    add_listed_server(registry, "calc", stdio_config(env={"SERVER_TOKEN": "${ECHO_MCP_TEST_TOKEN}"}))
    executor = make_executor(registry)
    try:
        result = await executor.invoke("calc_env_value", {"name": "SERVER_TOKEN"})
        assert result.output == {"result": "tok-123"}
        monkeypatch.delenv("ECHO_MCP_TEST_TOKEN")
        await executor.aclose()
        missing = await executor.invoke("calc_env_value", {"name": "SERVER_TOKEN"})
        assert not missing.success and "'ECHO_MCP_TEST_TOKEN'" in (missing.error or "")
    finally:
        await executor.aclose()


# -- bound to agents like any other tool -------------------------------------------------------------


# crewai's first import warns about its own package layout (ImportWarning); it is not ours to fix
@pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")
@pytest.mark.slow  # imports CrewAI and LangChain (paid once per session, so only slow when run alone)
def test_mcp_tools_bind_to_langchain_and_crewai_like_any_other_tool(calls: ToolExecutor) -> None:
    from workflow_bridge.crewai_tools import to_crewai_tool
    from workflow_bridge.langgraph_tools import to_langchain_tool

    add = calls.registry.get("mcp_calc_add")
    assert add is not None
    langchain_tool = to_langchain_tool(add, calls)
    assert langchain_tool.name == "calc_add"
    assert langchain_tool.invoke({"a": 2, "b": 3}) == '{"result": 5.0}'
    crew_tool = to_crewai_tool(add, calls)
    assert crew_tool.run(a=4, b=4) == '{"result": 8.0}'
    failing = to_langchain_tool(calls.registry.get("mcp_calc_fail"), calls)  # type: ignore[arg-type]
    assert "nope" in failing.invoke({"message": "nope"})
