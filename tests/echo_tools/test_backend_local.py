"""The `local` backend: call shapes, instance caching, isolation (thread, process, inline), timeouts."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest

from echo_tools import ToolContext, ToolRegistry
from tests.echo_tools._executor_support import BASIC, NUMBERS, local_tool, make_executor, make_inline
from tests.echo_tools.fixture_tools import basic


def test_one_dict_parameter_receives_the_whole_input() -> None:
    executor, _ = make_executor(local_tool("whole", "whole_dict"))
    assert executor.invoke_sync("whole", {"x": 1, "y": 2}).output == {"keys": ["x", "y"], "type": "dict"}


def test_unannotated_payload_parameter_receives_the_whole_input() -> None:
    executor, _ = make_executor(local_tool("whole", "whole_unannotated"))
    assert executor.invoke_sync("whole", {"b": 1, "a": 2}).output == {"keys": ["a", "b"]}


def test_one_pydantic_parameter_receives_a_model_built_from_the_input() -> None:
    executor, _ = make_executor(local_tool("model", "with_model"))
    result = executor.invoke_sync("model", {"text": "tea"})
    assert result.output == {"text": "TEA", "limit": 3, "type": "Query"}


def test_class_method_tools_share_one_cached_instance() -> None:
    tool = {
        "name": "multiply",
        "execution_config": {"module": BASIC, "class": "Calculator", "method": "multiply"},
        "input_schema": NUMBERS,
    }
    executor, _ = make_executor(tool)
    before = basic.Calculator.instances
    assert [executor.invoke_sync("multiply", {"a": 3, "b": n}).output for n in range(3)] == [0, 3, 6]
    assert basic.Calculator.instances == before + 1


def test_a_missing_function_fails_naming_it() -> None:
    executor, _ = make_executor(local_tool("ghost", "no_such_function"))
    result = executor.invoke_sync("ghost", {})
    assert result.error_type == "execution" and "'no_such_function'" in result.error


def test_wrong_keyword_arguments_fail_with_a_readable_error() -> None:
    executor, _ = make_executor(local_tool("add", "add"))
    result = executor.invoke_sync("add", {"a": 1, "c": 2})
    assert result.error_type == "execution" and "arguments it does not accept" in result.error


def test_module_allow_list_is_checked_again_at_call_time(tmp_path: Path) -> None:
    # a stored file edited by hand after registration must still not import a foreign module
    executor, _ = make_executor(local_tool("add", "add"))
    executor.registry.get("tool_add").execution_config["module"] = "os"
    result = executor.invoke_sync("add", {"a": 1, "b": 2})
    assert result.error_type == "execution" and "'os'" in result.error and "allowed modules" in result.error


def test_a_legacy_tool_without_execution_config_fails_clearly() -> None:
    registry = ToolRegistry(allowed_modules=["tests.echo_tools.fixture_tools"])
    registry.register({"name": "legacy", "description": "catalogue entry only"})
    from echo_tools import ToolExecutor

    result = ToolExecutor(registry).invoke_sync("legacy", {})
    assert result.error_type == "execution" and "execution_config" in result.error


def test_sync_tool_sleeping_past_its_timeout_returns_before_the_work_ends() -> None:
    basic.FINISHED.clear()
    executor, log = make_executor(local_tool("slow", "slow_sync", timeout_ms=100))
    result = executor.invoke_sync("slow", {"seconds": 5})
    assert not basic.FINISHED.is_set()  # the call came back while the thread still sleeps
    assert result.error_type == "timeout" and "100 ms" in result.error
    assert [e.type for e in log.events] == ["tool.invoked", "tool.timeout"]
    assert log.events[-1].error_type == "timeout"


async def test_context_timeout_overrides_the_tools_timeout() -> None:
    basic.CANCELLED.clear()
    executor, _ = make_executor(local_tool("slow", "slow_async", timeout_ms=60_000))
    result = await executor.invoke("slow", {"seconds": 30}, ToolContext(timeout_ms=200))
    assert result.error_type == "timeout" and "200 ms" in result.error


async def test_timeout_cancels_an_async_tool() -> None:
    executor, _ = make_executor(local_tool("slow", "slow_async", timeout_ms=200))
    assert (
        await executor.invoke("slow", {"seconds": 0})
    ).success  # first call imports; now the tool starts at once
    basic.CANCELLED.clear()
    result = await executor.invoke("slow", {"seconds": 30})
    assert result.error_type == "timeout"
    assert basic.CANCELLED.is_set()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_timeout_kills_the_subprocess(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    # 3 s: room for the child (about 0.2 s of CPU to start) to write its pid on a machine running other
    # suites beside this one (1 s was not, with four pytest workers on two cores)
    tool = local_tool("sleeper", "write_pid_and_sleep", timeout_ms=3000, config={"isolation": "process"})
    executor, log = make_executor(tool)
    result = await executor.invoke("sleeper", {"pid_file": str(pid_file), "seconds": 60})
    assert result.error_type == "timeout"
    assert pid_file.exists(), "the child did not start within the timeout"
    pid = int(pid_file.read_text())
    assert pid != os.getpid()
    assert not _pid_alive(pid)
    assert log.events[-1].type == "tool.timeout"


def test_process_isolation_returns_the_childs_output() -> None:
    executor, _ = make_executor(local_tool("pid", "pid", config={"isolation": "process"}))
    result = executor.invoke_sync("pid", {})
    assert result.success and result.output != os.getpid()
    assert result.metadata["pid"] == result.output
    assert not _pid_alive(result.output)


def test_process_isolation_reports_the_tools_exception() -> None:
    executor, _ = make_executor(local_tool("boom", "boom", config={"isolation": "process"}))
    result = executor.invoke_sync("boom", {"message": "child failed"})
    assert (
        result.error_type == "execution" and "ValueError" in result.error and "child failed" in result.error
    )


def test_inline_tools_run_in_the_calling_thread() -> None:
    executor, _ = make_executor(local_tool("where", "thread_name"))
    make_inline(executor.registry, "tool_where")
    assert executor.invoke_sync("where", {}).output == threading.current_thread().name


def test_thread_tools_run_in_a_worker_thread() -> None:
    executor, _ = make_executor(local_tool("where", "thread_name"))
    assert executor.invoke_sync("where", {}).output.startswith("echo-tools-worker")


async def test_inline_tools_run_on_the_loop_when_awaited() -> None:
    executor, log = make_executor(
        local_tool("add", "add", input_schema=NUMBERS, output_schema={"type": "number"})
    )
    make_inline(executor.registry, "tool_add")
    result = await executor.invoke("add", {"a": 1, "b": 2})
    assert result.output == 3 and [e.type for e in log.events] == ["tool.invoked", "tool.completed"]


def test_an_inline_tool_that_overruns_is_reported_as_a_timeout() -> None:
    basic.FINISHED.clear()
    executor, _ = make_executor(local_tool("slow", "slow_sync", timeout_ms=50))
    make_inline(executor.registry, "tool_slow")
    result = executor.invoke_sync("slow", {"seconds": 0.2})
    assert basic.FINISHED.is_set()  # inline work cannot be cut short ...
    assert result.error_type == "timeout"  # ... but the overrun is still a timeout


@pytest.mark.parametrize("isolation", ["thread", "inline"])
def test_retries_rerun_a_pure_tool_until_it_succeeds(isolation: str) -> None:
    key = f"pure-{isolation}"
    basic.COUNTERS.pop(key, None)
    tool = local_tool("flaky", "flaky", side_effect="pure", retry={"max_retries": 3, "backoff_ms": 1})
    executor, log = make_executor(tool)
    if isolation == "inline":
        make_inline(executor.registry, "tool_flaky")
    result = executor.invoke_sync("flaky", {"key": key, "fail_times": 2})
    assert result.success and result.output == {"attempts": 3} and result.attempts == 3
    assert basic.COUNTERS[key] == 3
    assert log.events[-1].attempts == 3


def test_retries_stop_at_max_retries() -> None:
    basic.COUNTERS.pop("idem", None)
    tool = local_tool("flaky", "flaky", side_effect="idempotent", retry={"max_retries": 1, "backoff_ms": 1})
    executor, _ = make_executor(tool)
    result = executor.invoke_sync("flaky", {"key": "idem", "fail_times": 5})
    assert result.error_type == "execution" and result.attempts == 2 and basic.COUNTERS["idem"] == 2


def test_external_tools_are_never_retried() -> None:
    basic.COUNTERS.pop("ext", None)
    tool = local_tool("flaky", "flaky", side_effect="external", retry={"max_retries": 3, "backoff_ms": 1})
    executor, _ = make_executor(tool)
    result = executor.invoke_sync("flaky", {"key": "ext", "fail_times": 1})
    assert not result.success and result.attempts == 1 and basic.COUNTERS["ext"] == 1


def test_timeouts_of_a_pure_tool_are_retried() -> None:
    basic.CANCELLED.clear()
    tool = local_tool(
        "slow", "slow_async", side_effect="pure", timeout_ms=50, retry={"max_retries": 2, "backoff_ms": 1}
    )
    executor, log = make_executor(tool)
    result = executor.invoke_sync("slow", {"seconds": 10})
    assert result.error_type == "timeout" and result.attempts == 3
    assert [e.type for e in log.events] == ["tool.invoked", "tool.timeout"]


def test_an_abandoned_sync_call_does_not_keep_the_process_alive(repo_root: Path) -> None:
    script = (
        "from tests.echo_tools._executor_support import local_tool, make_executor\n"
        "ex, _ = make_executor(local_tool('slow', 'slow_sync', timeout_ms=200))\n"
        "print(ex.invoke_sync('slow', {'seconds': 60}).error_type)\n"
    )
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", script], cwd=repo_root, capture_output=True, text=True, timeout=30, check=False
    )
    # the worker thread still sleeps for a minute; the process must exit anyway (within the 30 s bound)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "timeout"


async def test_the_first_calls_import_does_not_block_the_event_loop() -> None:
    executor, _ = make_executor(
        local_tool("ready", "ready", module="tests.echo_tools.fixture_tools.slow_import")
    )
    ticks_before_import_done: list[int] = []
    call = asyncio.ensure_future(executor.invoke("ready", {}))
    while not call.done():
        await asyncio.sleep(0.01)
        module = sys.modules.get("tests.echo_tools.fixture_tools.slow_import")
        if module is None or not module.IMPORTED.is_set():
            ticks_before_import_done.append(1)
    assert (await call).output == "imported"
    assert ticks_before_import_done  # the loop kept running while the module was being imported


def test_re_registering_a_tool_replaces_its_cached_callable() -> None:
    executor, _ = make_executor(local_tool("shape", "as_text"))
    assert executor.invoke_sync("shape", {"word": "ab"}).output == "abab"
    executor.registry.register(local_tool("shape", "as_list"))
    assert executor.invoke_sync("shape", {"n": 2}).output == [0, 1]


def test_forget_drops_cached_instances() -> None:
    tool = {
        "name": "multiply",
        "execution_config": {"module": BASIC, "class": "Calculator", "method": "multiply"},
    }
    executor, _ = make_executor(tool)
    before = basic.Calculator.instances
    executor.invoke_sync("multiply", {"a": 1, "b": 1})
    executor.forget("tool_multiply")
    executor.invoke_sync("multiply", {"a": 1, "b": 1})
    assert basic.Calculator.instances == before + 2


@pytest.mark.parametrize("isolation", ["thread", "inline"])
def test_a_type_error_inside_the_tool_is_reported_as_the_tools_own_error(isolation: str) -> None:
    executor, _ = make_executor(local_tool("bad", "type_error_inside"))
    if isolation == "inline":
        make_inline(executor.registry, "tool_bad")
    result = executor.invoke_sync("bad", {"word": "x"})
    assert "raised TypeError" in result.error and "does not accept" not in result.error
    unknown = executor.invoke_sync("bad", {"word": "x", "extra": 1})
    assert "does not accept" in unknown.error and "'extra'" in unknown.error


def test_a_tool_that_cannot_be_loaded_is_not_retried() -> None:
    tool = local_tool(
        "ghost", "no_such_function", side_effect="pure", retry={"max_retries": 3, "backoff_ms": 1}
    )
    executor, _ = make_executor(tool)
    result = executor.invoke_sync("ghost", {})
    assert result.error_type == "execution" and result.attempts == 1


@pytest.mark.parametrize("isolation", ["thread", "inline"])
def test_invoke_sync_passes_the_callers_context_variables_to_the_tool(isolation: str) -> None:
    executor, _ = make_executor(local_tool("rid", "read_request_id"))
    if isolation == "inline":
        make_inline(executor.registry, "tool_rid")
    token = basic.REQUEST_ID.set("req-42")
    try:
        assert executor.invoke_sync("rid", {}).output == "req-42"
    finally:
        basic.REQUEST_ID.reset(token)


async def test_invoke_passes_the_callers_context_variables_to_a_thread_tool() -> None:
    executor, _ = make_executor(local_tool("rid", "read_request_id"))
    token = basic.REQUEST_ID.set("req-43")
    try:
        assert (await executor.invoke("rid", {})).output == "req-43"
    finally:
        basic.REQUEST_ID.reset(token)


def test_a_model_that_cannot_be_built_from_the_input_is_an_execution_failure() -> None:
    executor, _ = make_executor(local_tool("model", "with_model"))
    result = executor.invoke_sync("model", {"text": "tea", "limit": "many"})
    assert result.error_type == "execution" and "ValidationError" in result.error and "limit" in result.error


def test_an_input_the_tool_rejects_with_value_error_is_not_retried() -> None:
    tool = local_tool("boom", "boom", side_effect="pure", retry={"max_retries": 3, "backoff_ms": 1})
    executor, log = make_executor(tool)
    result = executor.invoke_sync("boom", {"message": "provider 'x' is not configured"})
    assert not result.success and result.error_type == "execution"
    assert result.attempts == 1 and log.events[-1].attempts == 1
    assert "ValueError: provider 'x' is not configured" in (result.error or "")


@pytest.mark.parametrize("isolation", ["thread", "inline"])
async def test_a_timeout_error_raised_by_the_tool_itself_is_an_execution_failure(isolation: str) -> None:
    tool = local_tool("dial", "raise_timeout", config={"isolation": isolation})
    executor, log = make_executor(tool)
    awaited = await executor.invoke("dial", {"host": "db.example"})
    blocking = await asyncio.to_thread(executor.invoke_sync, "dial", {"host": "db.example"})
    for result in (awaited, blocking):
        assert result.error_type == "execution" and "db.example timed out" in result.error
    assert [e.type for e in log.events] == ["tool.invoked", "tool.failed"] * 2


def test_an_inline_tool_that_rejects_its_input_is_not_retried_and_a_bad_argument_is_named() -> None:
    retry = {"max_retries": 3, "backoff_ms": 1}
    tool = local_tool("boom", "boom", side_effect="pure", retry=retry, config={"isolation": "inline"})
    executor, log = make_executor(tool, local_tool("add", "add", config={"isolation": "inline"}))
    result = executor.invoke_sync("boom", {"message": "no such city"})
    assert result.error_type == "execution" and result.attempts == 1
    assert result.error == "Tool 'tool_boom' raised ValueError: no such city"
    unbound = executor.invoke_sync("add", {"a": 1, "b": 2, "c": 3})
    assert "was called with arguments it does not accept" in unbound.error and "'c'" in unbound.error


REEXPORTS = "tests.echo_tools.fixture_tools.reexports"


@pytest.mark.parametrize("isolation", ["thread", "inline", "process"])
def test_a_function_an_allowed_module_only_imported_cannot_be_called(tmp_path, isolation: str) -> None:
    victim = tmp_path / "keep"
    victim.mkdir()
    tool = local_tool("rm", "rmtree", module=REEXPORTS, config={"isolation": isolation})
    executor, _ = make_executor(tool)
    result = executor.invoke_sync("rm", {"path": str(victim)})
    assert not result.success and result.error_type == "execution"
    assert "shutil.rmtree" in (result.error or "") and "outside the allowed modules" in (result.error or "")
    assert victim.exists()


def test_a_class_an_allowed_module_only_imported_cannot_be_a_tool() -> None:
    tool = {
        "name": "cwd",
        "tool_type": "local",
        "execution_config": {"module": REEXPORTS, "class": "Path", "method": "cwd"},
    }
    executor, _ = make_executor(tool)
    result = executor.invoke_sync("cwd", {})
    assert not result.success and "pathlib.Path" in (result.error or "")


def test_functions_defined_inside_the_allowed_modules_still_run_through_a_reexport() -> None:
    executor, _ = make_executor(
        local_tool("own", "own", module=REEXPORTS), local_tool("add2", "add", module=REEXPORTS)
    )
    assert executor.invoke_sync("own", {"text": "hi"}).output == "HI"
    assert executor.invoke_sync("add2", {"a": 1, "b": 2}).output == 3


def test_a_module_not_on_the_path_fails_with_a_pythonpath_hint() -> None:
    registry = ToolRegistry(allowed_modules=["my_tools_not_on_path"])
    registry.register(
        {"name": "times", "execution_config": {"module": "my_tools_not_on_path", "function": "times"}}
    )
    from echo_tools import ToolExecutor

    result = ToolExecutor(registry).invoke_sync("times", {})
    assert "cannot import module 'my_tools_not_on_path'" in result.error
    assert "on PYTHONPATH" in result.error
