"""Executor events (order, context ids, redaction, broken sinks), metrics and concurrency limits."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from echo_tools import JsonlEventLog, ToolContext, ToolEvent, ToolResult
from tests.echo_tools._executor_support import NUMBERS, local_tool, make_executor
from tests.echo_tools.fixture_tools import basic

ADD = local_tool("add", "add", input_schema=NUMBERS, output_schema={"type": "number"})
CONTEXT = ToolContext(
    agent_id="agent-1",
    workflow_id="wf-1",
    run_id="run-1",
    node_id="node-1",
    tool_call_id="call-1",
    trace_id="t-1",
)


def test_a_call_emits_invoked_then_completed_with_the_context_ids() -> None:
    executor, log = make_executor(ADD)
    result = executor.invoke_sync("add", {"a": 1, "b": 2}, CONTEXT)
    invoked, completed = log.events
    assert (invoked.type, completed.type) == ("tool.invoked", "tool.completed")
    for event in log.events:
        assert isinstance(event, ToolEvent)
        assert (event.agent_id, event.workflow_id, event.run_id) == ("agent-1", "wf-1", "run-1")
        assert (event.node_id, event.tool_call_id, event.trace_id) == ("node-1", "call-1", "t-1")
        assert (event.tool_id, event.tool_name, event.tool_type) == ("tool_add", "add", "local")
    assert invoked.input == {"a": 1, "b": 2}
    assert completed.output == 3 and completed.attempts == 1
    assert completed.duration_ms == pytest.approx(result.duration_ms)
    assert invoked.event_id != completed.event_id and len(invoked.event_id) == 32
    assert invoked.timestamp.endswith("Z") and invoked.timestamp <= completed.timestamp


def test_events_serialise_to_json_with_every_field() -> None:
    executor, log = make_executor(ADD)
    executor.invoke_sync("add", {"a": 1, "b": 2}, CONTEXT)
    data = json.loads(log.events[-1].to_json())
    assert data["type"] == "tool.completed" and data["run_id"] == "run-1"
    assert len(data["event_id"]) == 32 and data["timestamp"].endswith("Z")


def test_a_raising_sink_never_breaks_the_call(caplog: pytest.LogCaptureFixture) -> None:
    def broken(event: ToolEvent) -> None:
        raise RuntimeError("sink is down")

    executor, log = make_executor(ADD)
    executor.add_sink(broken)
    with caplog.at_level(logging.ERROR):
        result = executor.invoke_sync("add", {"a": 1, "b": 2})
    assert result.success and result.output == 3
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed"]
    assert "sink is down" in caplog.text


def test_secrets_in_input_and_output_are_redacted_in_events_but_not_for_the_tool() -> None:
    executor, log = make_executor(local_tool("echo", "echo"))
    data = {"query": "q", "api_key": "k-1", "nested": {"password": "p-1", "keep": 1}, "max_tokens": 5}
    result = executor.invoke_sync("echo", data)
    assert result.output == data  # the tool saw the real values
    invoked, completed = log.events
    expected = {"query": "q", "api_key": "***", "nested": {"password": "***", "keep": 1}, "max_tokens": 5}
    assert invoked.input == expected and completed.output == expected


def test_a_jsonl_sink_gets_one_line_per_event(tmp_path) -> None:  # noqa: ANN001
    executor, _ = make_executor(ADD)
    path = tmp_path / "events.jsonl"
    executor.add_sink(JsonlEventLog(path))
    executor.invoke_sync("add", {"a": 1, "b": 2}, CONTEXT)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["type"] for line in lines] == ["tool.invoked", "tool.completed"]
    assert lines[0]["tool_call_id"] == "call-1"


def test_failed_call_event_carries_the_error_and_input() -> None:
    executor, log = make_executor(local_tool("login", "login"))
    executor.invoke_sync("login", {"user": "ann", "password": "hunter2"}, CONTEXT)
    failed = log.events[-1]
    assert (
        failed.type == "tool.failed" and failed.error_type == "execution" and "'ann' refused" in failed.error
    )
    assert failed.input == {"user": "ann", "password": "***"} and failed.run_id == "run-1"


def test_a_secret_key_typed_as_text_is_still_redacted_in_every_event() -> None:
    # keys typed scalar skip the redaction check only when their name is harmless
    schema = {
        "type": "object",
        "properties": {"user": {"type": "string"}, "password": {"type": "string"}},
        "required": ["user", "password"],
    }
    for isolation in ("inline", "thread"):
        tool = local_tool(f"login {isolation}", "login", input_schema=schema, config={"isolation": isolation})
        executor, log = make_executor(tool)
        executor.invoke_sync(f"login {isolation}", {"user": "ann", "password": "hunter2"})
        invoked, failed = log.events
        assert invoked.input == failed.input == {"user": "ann", "password": "***"}


def test_extra_keys_beside_scalar_typed_ones_are_still_redacted() -> None:
    schema = {"type": "object", "properties": {"query": {"type": "string"}}}
    executor, log = make_executor(
        local_tool("echo", "echo", input_schema=schema, config={"isolation": "inline"})
    )
    data = {"query": "q", "api_key": "k-1", "nested": {"token": "t"}}
    assert executor.invoke_sync("echo", data).output == data
    invoked, completed = log.events
    assert invoked.input == completed.output == {"query": "q", "api_key": "***", "nested": {"token": "***"}}


def test_inline_and_thread_calls_give_equal_results_and_events() -> None:
    tools = [
        local_tool(
            f"add {iso}",
            "add",
            input_schema=NUMBERS,
            output_schema={"type": "number"},
            config={"isolation": iso},
        )
        for iso in ("inline", "thread")
    ]
    executor, log = make_executor(*tools)
    inline = executor.invoke_sync("add inline", {"a": 1, "b": 2}, CONTEXT)
    thread = executor.invoke_sync("add thread", {"a": 1, "b": 2}, CONTEXT)
    assert type(inline) is type(thread) is ToolResult
    assert inline.model_dump(exclude={"tool_id", "name", "duration_ms"}) == thread.model_dump(
        exclude={"tool_id", "name", "duration_ms"}
    )
    assert inline == ToolResult.model_validate(inline.model_dump())
    dicts = [e.to_dict() for e in log.events]
    for d in dicts:
        del d["event_id"], d["timestamp"], d["tool_id"], d["tool_name"], d["call_id"]  # per call
        d.pop("duration_ms", None)
    assert dicts[0:2] == dicts[2:4] and [d["type"] for d in dicts[:2]] == ["tool.invoked", "tool.completed"]
    assert dicts[1]["output"] == 3 and dicts[1]["run_id"] == "run-1" and dicts[1]["attempts"] == 1


def test_metrics_count_calls_failures_and_timeouts_with_percentiles() -> None:
    executor, _ = make_executor(ADD, local_tool("slow", "slow_async", timeout_ms=50))
    for i in range(10):
        executor.invoke_sync("add", {"a": i, "b": 1})
    executor.invoke_sync("add", {"a": "x", "b": 1})
    executor.invoke_sync("slow", {"seconds": 5})
    metrics = executor.metrics()
    assert metrics["tool_add"]["calls"] == 11 and metrics["tool_add"]["failures"] == 1
    assert metrics["tool_slow"]["timeouts"] == 1 and metrics["tool_slow"]["failures"] == 1
    add = metrics["tool_add"]
    assert 0 < add["p50_ms"] <= add["p95_ms"] <= add["p99_ms"] <= add["max_ms"]


async def test_max_concurrency_is_honoured() -> None:
    basic.PEAK.pop("limited", None)
    tool = local_tool("gated", "gated", config={"max_concurrency": 3})
    executor, _ = make_executor(tool)
    results = await asyncio.gather(
        *(executor.invoke("gated", {"key": "limited", "release": 0.01}) for _ in range(20))
    )
    assert all(r.success for r in results)
    assert basic.PEAK["limited"] == 3


async def test_without_a_limit_calls_overlap() -> None:
    basic.PEAK.pop("free", None)
    executor, _ = make_executor(local_tool("gated", "gated"))
    await asyncio.gather(*(executor.invoke("gated", {"key": "free", "release": 0.01}) for _ in range(20)))
    assert basic.PEAK["free"] > 3


def test_backend_for_builds_each_backend_once_and_refuses_unknown_types() -> None:
    executor, _ = make_executor()
    assert executor.backend_for("local") is executor.backend_for("local")
    with pytest.raises(ValueError, match="'ftp'"):
        executor.backend_for("ftp")


async def test_a_call_cancelled_by_its_caller_still_gets_a_closing_event() -> None:
    basic.CANCELLED.clear()
    basic.STARTED.clear()
    executor, log = make_executor(local_tool("slow", "slow_async"))
    task = asyncio.ensure_future(executor.invoke("slow", {"seconds": 30}, CONTEXT))
    assert await asyncio.to_thread(basic.STARTED.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [e.type for e in log.events] == ["tool.invoked", "tool.failed"]
    assert "cancelled" in log.events[-1].error and log.events[-1].run_id == "run-1"
    assert basic.CANCELLED.is_set()


def test_the_latency_reservoir_stays_bounded_and_percentiles_are_nearest_rank() -> None:
    from echo_tools.metrics import RESERVOIR, MetricsRecorder, percentile

    recorder = MetricsRecorder()
    for i in range(RESERVOIR * 2):
        recorder.record("t", float(i), "timeout" if i % 10 == 0 else None)
    stats = recorder.snapshot()["t"]
    timeouts = len(range(0, RESERVOIR * 2, 10))
    assert stats["calls"] == RESERVOIR * 2 and stats["timeouts"] == stats["failures"] == timeouts
    assert stats["max_ms"] == RESERVOIR * 2 - 1 and stats["p50_ms"] >= RESERVOIR  # only recent calls kept
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0 and percentile([], 0.99) == 0.0


def test_the_executor_emits_plain_tool_events_with_the_context_ids() -> None:
    executor, log = make_executor(ADD)
    executor.invoke_sync("add", {"a": 1, "b": 2}, CONTEXT)
    invoked, completed = log.events
    assert type(invoked) is ToolEvent and type(completed) is ToolEvent
    assert invoked.run_id == completed.run_id == "run-1" and invoked.input == {"a": 1, "b": 2}
    assert invoked.event_id != completed.event_id and len(completed.event_id) == 32
    assert completed.timestamp.endswith("Z")


def test_a_call_without_a_context_has_events_whose_ids_read_as_none() -> None:
    executor, log = make_executor(ADD)
    executor.invoke_sync("add", {"a": 1, "b": 2})
    executor.invoke_sync("add", {"a": 1, "b": 2}, ToolContext(run_id="run-2"))
    bare, _, with_ids, _ = log.events
    assert (bare.agent_id, bare.run_id, bare.trace_id, bare.tool_call_id) == (None, None, None, None)
    assert "run_id" not in bare.to_dict() and bare.to_dict()["tool_id"] == "tool_add"
    assert with_ids.run_id == "run-2" and with_ids.to_dict()["run_id"] == "run-2"


def test_a_secret_quoted_by_a_validation_error_never_reaches_the_events():
    from tests.echo_tools._executor_support import local_tool, make_executor

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "number"},
            "b": {"type": "number"},
            "api_key": {"type": "string", "minLength": 40},
        },
    }
    executor, log = make_executor(local_tool("add", "add", input_schema=schema))
    result = executor.invoke_sync("add", {"a": 1, "b": 2, "api_key": "sk-live-SECRET"})
    assert result.error_type == "validation" and "input.api_key" in (result.error or "")
    assert "sk-live-SECRET" not in (result.error or "")
    assert all("sk-live-SECRET" not in event.to_json() for event in log.events)
