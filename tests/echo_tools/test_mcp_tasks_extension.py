"""The Tasks extension (2026-07-28, `io.modelcontextprotocol/tasks`): a server answering a long tool with a
task is followed to its end: its status messages are the call's `tool.progress` events, its requests are
answered by the call's handlers, its result is the call's; a failed task fails the call naming the server
and the task; a task that never finishes is stopped by the call's deadline, and cancelled on the server.

The server (`mcp_servers/tasks_ext_server.py`, a JSON-RPC program) offers tasks only to a client that
declares the extension in its requests: under the SDK 1.x (a 2025 revision, no extensions) its tools
answer at once, which those tests assert instead."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools import EgressPolicy, MemoryEventLog, ToolContext, ToolExecutor, ToolRegistry
from echo_tools.compat.mcp import GENERATION
from echo_tools.mcp.callbacks import elicitation_handler
from tests.echo_tools._mcp_support import SERVERS, make_registry

SERVER = SERVERS / "tasks_ext_server.py"
TASKS = GENERATION >= 2  # the client declares the extension (2026-07-28)


@pytest.fixture
def tasks(tmp_path: Path) -> Iterator[tuple[ToolRegistry, ToolExecutor, MemoryEventLog]]:
    registry = make_registry(tmp_path)
    registry.add_mcp_server("tasks", {"command": sys.executable, "args": [str(SERVER)], "timeout": 30})
    log = MemoryEventLog()
    executor = ToolExecutor(registry, egress=EgressPolicy.local(), event_sinks=[log])
    yield registry, executor, log
    executor.close()


def test_a_long_tool_answered_with_a_task_is_followed_to_its_result_with_progress(tasks) -> None:
    _, executor, log = tasks
    result = executor.invoke_sync("mcp_tasks_long_job", {"steps": 3})
    assert result.success, result.error
    progress = [
        e.metadata for e in log.events if e.type == "tool.progress" and e.tool_id == "mcp_tasks_long_job"
    ]
    if not TASKS:
        assert result.output == "long_job ran at once" and progress == []
        return
    assert result.output == "long job done in 3 steps"
    assert [p["message"] for p in progress] == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]
    assert {p["mcp_server"] for p in progress} == {"tasks"} and all(
        p["task"] == progress[0]["task"] for p in progress
    )


def test_a_task_asking_for_input_is_answered_by_the_calls_handler(tasks) -> None:
    _, executor, _ = tasks
    asked: list[str] = []

    def person(request: dict) -> dict:
        asked.append(request["message"])
        return {"action": "accept", "content": {"colour": "teal"}}

    with elicitation_handler(person):
        result = executor.invoke_sync("mcp_tasks_ask_then_finish", {})
    if not TASKS:
        assert result.output == "ask_then_finish ran at once" and asked == []
        return
    assert result.output == "colour teal" and asked == ["Which colour?"]


def test_a_failed_task_fails_the_call_naming_the_server_the_task_and_its_error(tasks) -> None:
    _, executor, _ = tasks
    result = executor.invoke_sync("mcp_tasks_failing_job", {})
    if not TASKS:
        assert result.output == "failing_job ran at once"
        return
    assert not result.success and result.output is None
    assert "'tasks'" in str(result.error) and "failed: the job's disk is full (code -32603)" in str(
        result.error
    )


def test_a_task_that_never_finishes_is_stopped_by_the_deadline_and_cancelled_on_the_server(tasks) -> None:
    _, executor, _ = tasks
    result = executor.invoke_sync("mcp_tasks_never_done", {}, ToolContext(timeout_ms=1000))
    if not TASKS:
        assert result.output == "never_done ran at once"
        return
    assert result.error_type == "timeout" and result.output is None
    deadline = time.monotonic() + 20  # the cancel is sent as the call ends: wait (bounded) for the server
    cancels = executor.invoke_sync("mcp_tasks_cancels", {}).output
    while cancels != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
        cancels = executor.invoke_sync("mcp_tasks_cancels", {}).output
    assert cancels == 1


def test_a_result_the_revision_does_not_allow_fails_the_call_naming_the_server_and_the_field(tasks) -> None:
    _, executor, log = tasks
    result = executor.invoke_sync("mcp_tasks_bad_result", {})
    assert not result.success and result.output is None
    assert "'tasks'" in str(result.error) and "content" in str(result.error), result.error
    assert not [e for e in log.events if e.type == "tool.completed" and e.tool_id == "mcp_tasks_bad_result"]


def test_a_2x_servers_tool_changes_reach_the_catalogue_on_either_revision(tmp_path: Path) -> None:
    from echo_tools.models import ToolStatus
    from tests.echo_tools._mcp_support import EventWaiter, stdio_config

    registry = make_registry(tmp_path)
    registry.add_mcp_server("calc", stdio_config(SERVERS / "calc_v2.py"))
    waiter = EventWaiter()
    registry.events.add(waiter)
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        # 2026-07-28: the change comes on the session's subscriptions/listen stream; 2025: as a notification
        assert executor.invoke_sync("mcp_calc_change_tools", {}).success
        assert waiter.wait_for("mcp_calc_new_tool", "mcp_calc_old_tool")
        assert registry.get("mcp_calc_old_tool").status == ToolStatus.DISABLED  # type: ignore[union-attr]
        assert executor.invoke_sync("mcp_calc_new_tool", {"x": 21}).output == {"result": 42}
    finally:
        executor.close()
