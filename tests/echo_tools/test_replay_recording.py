"""ToolExecutor(..., replay=RunHistory(...).recording(run_id)): each call is answered from the recorded run,
in order, with no tool run; its events carry `replayed: true`; a call the recording lacks is named."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from echo_tools import MemoryEventLog, ToolContext, ToolExecutor
from echo_tools.history import RunHistory
from echo_tools.history.recording import Recording, ReplayMismatchError
from tests.echo_tools._executor_support import local_tool, make_registry
from tests.echo_tools.fixture_tools import basic

COUNT = local_tool(
    "Count", "count_calls", input_schema={"type": "object", "properties": {"key": {"type": "string"}}}
)
BOOM = local_tool(
    "Boom", "boom", input_schema={"type": "object", "properties": {"message": {"type": "string"}}}
)


def _record(history: RunHistory, run_id: str = "run_rec") -> None:
    """Three calls under `run_id`: Count twice (answers 1 and 2), Boom once (fails)."""
    basic.COUNTERS.pop("replay", None)
    executor = ToolExecutor(make_registry(COUNT, BOOM), [history])
    context = ToolContext(run_id=run_id, agent_id="agent_1")
    assert executor.invoke_sync("Count", {"key": "replay"}, context).output == 1
    assert executor.invoke_sync("Boom", {"message": "bad day"}, context).success is False
    assert executor.invoke_sync("Count", {"key": "replay"}, context).output == 2
    executor.close()


def test_each_call_is_answered_from_the_recording_in_order_and_no_tool_runs(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    _record(history)
    log = MemoryEventLog()
    recording = history.recording("run_rec")
    executor = ToolExecutor(make_registry(COUNT, BOOM), [log], replay=recording)
    context = ToolContext(run_id="run_again")
    first = executor.invoke_sync("Count", {"key": "replay"}, context)
    failed = executor.invoke_sync("Boom", {"message": "bad day"}, context)
    second = executor.invoke_sync("Count", {"key": "replay"}, context)
    executor.close()
    assert (first.output, second.output) == (1, 2)
    assert basic.COUNTERS["replay"] == 2  # the tool ran only while recording
    assert failed.success is False and "bad day" in (failed.error or "")
    assert all(r.metadata["replayed"] is True for r in (first, failed, second))
    kinds = [
        "tool.invoked",
        "tool.completed",
        "tool.invoked",
        "tool.failed",
        "tool.invoked",
        "tool.completed",
    ]
    assert [e.type for e in log.events] == kinds
    assert all(e.metadata.get("replayed") is True and e.run_id == "run_again" for e in log.events)
    assert recording.mismatch is None and recording.unused() == 0
    recording.check()  # nothing differed: no error


def test_a_call_not_recorded_is_a_failed_call_naming_it(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    _record(history)
    recording = history.recording("run_rec")
    executor = ToolExecutor(make_registry(COUNT, BOOM), replay=recording)
    executor.invoke_sync("Count", {"key": "replay"})
    executor.invoke_sync("Count", {"key": "replay"})
    extra = executor.invoke_sync("Count", {"key": "replay"})  # the recording holds two
    executor.close()
    assert extra.success is False and extra.error_type == "validation"
    assert (
        extra.error
        == "replay of run 'run_rec': call 3 ('tool_count' with {'key': 'replay'}) was not recorded"
    )
    with pytest.raises(ReplayMismatchError, match=r"run 'run_rec'.*call 3 \('tool_count'.*not recorded"):
        recording.check()
    assert recording.unused() == 1  # Boom was never asked for


def test_a_call_with_other_input_names_both_inputs(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    _record(history)
    recording = history.recording("run_rec")
    executor = ToolExecutor(make_registry(COUNT, BOOM), replay=recording)
    changed = executor.invoke_sync("Boom", {"message": "good day"})
    executor.close()
    assert changed.success is False
    assert recording.mismatch is not None
    assert "'bad day'" in recording.mismatch and "'good day'" in recording.mismatch
    assert "call 1 ('tool_boom')" in recording.mismatch


def test_an_unknown_run_gives_an_empty_recording_whose_first_call_is_named(tmp_path: Path) -> None:
    recording = RunHistory(tmp_path).recording("run_nope")
    executor = ToolExecutor(make_registry(COUNT), replay=recording)
    result = executor.invoke_sync("Count", {"key": "x"})
    executor.close()
    assert result.success is False
    with pytest.raises(
        ReplayMismatchError, match=r"run 'run_nope'.*call 1 \('tool_count' with \{'key': 'x'\}\)"
    ):
        recording.check()


def test_invalid_input_is_refused_before_the_recording_is_consulted(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    _record(history)
    recording = history.recording("run_rec")
    executor = ToolExecutor(make_registry(COUNT, BOOM), replay=recording)
    refused = executor.invoke_sync("Count", {"key": 5})
    executor.close()
    assert refused.success is False and refused.error_field == "input.key"
    assert recording.calls == 0 and recording.mismatch is None


def test_a_recording_longer_than_one_page_is_read_whole(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    executor = ToolExecutor(make_registry(COUNT), [history])
    basic.COUNTERS.pop("long", None)
    context = ToolContext(run_id="run_long")
    for _ in range(6_000):  # 12,000 events: more than one page and more than `events()`' largest limit
        executor.invoke_sync("Count", {"key": "long"}, context)
    executor.close()
    recording = history.recording("run_long")
    assert recording.unused() == 6_000
    replayer = ToolExecutor(make_registry(COUNT), replay=recording)
    outputs = [replayer.invoke_sync("Count", {"key": "long"}).output for _ in range(6_000)]
    replayer.close()
    assert outputs == list(range(1, 6_001)) and recording.mismatch is None


def test_calls_made_inside_a_composite_call_are_left_to_it() -> None:
    from echo_tools.events import ToolEvent

    events = [
        ToolEvent(type="tool.invoked", tool_id="outer", call_id="c1", input={}),
        ToolEvent(type="tool.invoked", tool_id="inner", call_id="c2", parent_call_id="c1", input={}),
        ToolEvent(type="tool.completed", tool_id="inner", call_id="c2", parent_call_id="c1", output=1),
        ToolEvent(type="tool.completed", tool_id="outer", call_id="c1", output=2),
        ToolEvent(type="tool.failed", tool_id="outer", call_id="c3", attempts=0, error="refused"),
    ]
    recording = Recording(events)
    assert recording.unused() == 1  # the outer call; the refused one has no `tool.invoked`


def test_replay_executor_is_an_executor_over_the_recorded_events(tmp_path: Path) -> None:
    from workflow_bridge.replay import ReplayExecutor

    history = RunHistory(tmp_path)
    _record(history)
    real = ToolExecutor(make_registry(COUNT, BOOM))
    replayer = ReplayExecutor(real, history.events(run_id="run_rec"))
    assert replayer.invoke_sync("Count", {"key": "replay"}).output == 1
    assert replayer.invoke_sync("Boom", {"message": "other"}).success is False
    replayer.close()
    real.close()
    assert replayer.mismatch is not None and "call 2 ('tool_boom')" in replayer.mismatch
    assert replayer.unused() == 1


async def test_an_awaited_call_is_answered_from_the_recording_too(tmp_path: Path) -> None:
    history = RunHistory(tmp_path)
    await asyncio.to_thread(_record, history)  # recorded by a sync caller
    log = MemoryEventLog()
    executor = ToolExecutor(make_registry(COUNT, BOOM), [log], replay=history.recording("run_rec"))
    first = await executor.invoke("Count", {"key": "replay"}, ToolContext(run_id="run_async"))
    await executor.aclose()
    assert first.output == 1 and first.metadata["replayed"] is True
    assert [(e.type, e.run_id, e.metadata.get("replayed")) for e in log.events] == [
        ("tool.invoked", "run_async", True),
        ("tool.completed", "run_async", True),
    ]
