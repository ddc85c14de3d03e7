"""The executor's result cache: deterministic, pure tools with `cache_ttl_s` answer repeated calls from it."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from echo_tools import MemoryEventLog, ToolDef, ToolExecutor, ToolRegistry
from echo_tools.result_cache import ResultCache
from tests.echo_tools.fixture_tools import basic

MODULE = "tests.echo_tools.fixture_tools.basic"
KEY = {"key": {"type": "string"}}


def _counting(tool_id: str = "counter", function: str = "count_calls", **fields: Any) -> ToolDef:
    properties = {**KEY, "fail_times": {"type": "integer"}} if function == "flaky" else KEY
    defaults: dict[str, Any] = {"determinism": "deterministic", "side_effect": "pure", "cache_ttl_s": 60}
    return ToolDef(
        tool_id=tool_id,
        name=tool_id,
        execution_config={"module": MODULE, "function": function},
        input_schema={"type": "object", "properties": properties},
        **{**defaults, **fields},
    )


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def key() -> str:
    return f"k{uuid.uuid4().hex}"


def _executor(registry: ToolRegistry, clock: Clock | None = None, **cache: Any) -> ToolExecutor:
    executor = ToolExecutor(
        registry, event_sinks=[MemoryEventLog()], result_cache=ResultCache(clock=clock or Clock(), **cache)
    )
    return executor


def _registry(tmp_path: Path, *tools: ToolDef) -> ToolRegistry:
    registry = ToolRegistry(storage_dir=tmp_path, allowed_modules=["tests"])
    for tool in tools:
        registry.register(tool)
    return registry


async def test_two_identical_calls_run_the_tool_once(tmp_path: Path, key: str) -> None:
    executor = _executor(_registry(tmp_path, _counting()))
    log = executor.events.sinks[0]
    assert isinstance(log, MemoryEventLog)

    first = await executor.invoke("counter", {"key": key})
    second = await executor.invoke("counter", {"key": key})

    assert basic.COUNTERS[key] == 1
    assert first.output == second.output == 1
    assert "cached" not in first.metadata and second.metadata["cached"] is True
    completed = log.of_type("tool.completed")
    assert [e.cached for e in completed] == [None, True]
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed"] * 2
    assert completed[1].to_dict()["cached"] is True and second.attempts == 0
    await executor.aclose()


def test_the_sync_path_answers_from_the_cache_too(tmp_path: Path, key: str) -> None:
    executor = _executor(_registry(tmp_path, _counting()))
    assert executor.invoke_sync("counter", {"key": key}).output == 1
    again = executor.invoke_sync("counter", {"key": key})
    assert again.output == 1 and again.metadata["cached"] is True and basic.COUNTERS[key] == 1
    executor.close()


async def test_a_different_input_runs_again(tmp_path: Path, key: str) -> None:
    executor = _executor(_registry(tmp_path, _counting()))
    await executor.invoke("counter", {"key": key})
    other = await executor.invoke("counter", {"key": key + "x"})
    assert other.output == 1 and "cached" not in other.metadata
    assert basic.COUNTERS[key] == 1 and basic.COUNTERS[key + "x"] == 1
    await executor.aclose()


async def test_a_result_expires_after_its_ttl(tmp_path: Path, key: str) -> None:
    clock = Clock()
    executor = _executor(_registry(tmp_path, _counting(cache_ttl_s=30)), clock)
    await executor.invoke("counter", {"key": key})
    clock.now += 29.9
    assert (await executor.invoke("counter", {"key": key})).metadata.get("cached") is True
    clock.now += 0.1
    late = await executor.invoke("counter", {"key": key})
    assert late.output == 2 and "cached" not in late.metadata
    await executor.aclose()


@pytest.mark.parametrize(
    "fields",
    [
        {"determinism": "nondeterministic"},
        {"side_effect": "idempotent"},
        {"side_effect": "external"},
        {"cache_ttl_s": None},
    ],
)
async def test_a_tool_that_is_not_deterministic_and_pure_with_a_ttl_is_never_cached(
    tmp_path: Path, key: str, fields: dict[str, Any]
) -> None:
    executor = _executor(_registry(tmp_path, _counting(**fields)))
    outputs = [(await executor.invoke("counter", {"key": key})).output for _ in range(3)]
    assert outputs == [1, 2, 3]
    assert len(executor.result_cache) == 0
    await executor.aclose()


async def test_a_failure_is_never_cached(tmp_path: Path, key: str) -> None:
    executor = _executor(_registry(tmp_path, _counting("flaky", "flaky", retry={"max_retries": 0})))
    failed = await executor.invoke("flaky", {"key": key, "fail_times": 1})
    assert not failed.success and "attempt 1 failed" in (failed.error or "")
    ok = await executor.invoke("flaky", {"key": key, "fail_times": 1})
    assert ok.success and ok.output == {"attempts": 2} and "cached" not in ok.metadata
    again = await executor.invoke("flaky", {"key": key, "fail_times": 1})
    assert again.output == {"attempts": 2} and again.metadata["cached"] is True
    assert basic.COUNTERS[key] == 2
    await executor.aclose()


async def test_the_cache_is_bounded_least_recently_used_first(tmp_path: Path, key: str) -> None:
    executor = _executor(_registry(tmp_path, _counting()), max_entries=2)
    for suffix in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" arrives
        await executor.invoke("counter", {"key": key + suffix})
    assert len(executor.result_cache) == 2
    assert (await executor.invoke("counter", {"key": key + "a"})).metadata.get("cached") is True
    assert "cached" not in (await executor.invoke("counter", {"key": key + "b"})).metadata
    await executor.aclose()


async def test_a_tool_registered_again_does_not_read_the_old_results(tmp_path: Path, key: str) -> None:
    registry = _registry(tmp_path, _counting())
    executor = _executor(registry)
    await executor.invoke("counter", {"key": key})
    registry.register(_counting(description="changed"))
    fresh = await executor.invoke("counter", {"key": key})
    assert fresh.output == 2 and "cached" not in fresh.metadata
    await executor.aclose()


async def test_a_cached_output_is_a_copy_the_caller_may_change(tmp_path: Path, key: str) -> None:
    executor = _executor(_registry(tmp_path, _counting("flaky", "flaky")))
    first = await executor.invoke("flaky", {"key": key, "fail_times": 0})
    first.output["attempts"] = 99
    second = await executor.invoke("flaky", {"key": key, "fail_times": 0})
    second.output["attempts"] = 98
    third = await executor.invoke("flaky", {"key": key, "fail_times": 0})
    assert third.output == {"attempts": 1} and third.metadata["cached"] is True
    await executor.aclose()


def test_a_cache_of_no_entries_is_refused_naming_the_value() -> None:
    with pytest.raises(ValueError, match="max_entries must be at least 1, got 0"):
        ResultCache(max_entries=0)
