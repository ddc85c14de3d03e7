"""A timeout says what happened to the work: a thread tool that cannot be stopped is reported abandoned and
still running (and it does go on), an inline tool that overran is reported as having finished late."""

from __future__ import annotations

import time
from pathlib import Path

from echo_tools import ToolDef, ToolExecutor, ToolRegistry

MODULE = "tests.echo_tools.fixture_tools.side_effects"


def _tool(function: str, isolation: str, properties: dict[str, object]) -> ToolDef:
    return ToolDef(
        tool_id=f"{function}_{isolation}",
        name=f"{function} {isolation}",
        execution_config={"module": MODULE, "function": function, "isolation": isolation},
        input_schema={"type": "object", "properties": properties},
        timeout_ms=300,
    )


def test_a_thread_tool_past_its_deadline_is_reported_abandoned_and_still_running(tmp_path: Path) -> None:
    registry = ToolRegistry(
        storage_dir=tmp_path / "tools", allowed_modules=["tests.echo_tools.fixture_tools"]
    )
    text = {"type": "string"}
    registry.register(_tool("wait_then_write", "thread", {"path": text, "release": text}))
    executor = ToolExecutor(registry)
    written, release = tmp_path / "late.txt", tmp_path / "release"
    result = executor.invoke_sync("wait_then_write_thread", {"path": str(written), "release": str(release)})
    assert result.error_type == "timeout"
    assert "abandoned and may still be running" in (result.error or "")
    assert "was stopped" not in (result.error or "")
    release.touch()  # the abandoned thread goes on: its side effect happens after the call returned
    deadline = time.monotonic() + 60
    while not written.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert written.read_text(encoding="utf-8") == "written after the deadline"
    executor.close()


def test_an_inline_tool_past_its_deadline_is_reported_as_finished_late(tmp_path: Path) -> None:
    registry = ToolRegistry(
        storage_dir=tmp_path / "tools", allowed_modules=["tests.echo_tools.fixture_tools"]
    )
    registry.register(
        ToolDef(
            tool_id="slow_inline",
            name="slow inline",
            execution_config={
                "module": "tests.echo_tools.fixture_tools.basic",
                "function": "slow_sync",
                "isolation": "inline",
            },
            input_schema={"type": "object", "properties": {"seconds": {"type": "number"}}},
            timeout_ms=50,
        )
    )
    executor = ToolExecutor(registry)
    result = executor.invoke_sync("slow_inline", {"seconds": 0.2})
    assert result.error_type == "timeout" and result.output is None
    assert "ran inline past its timeout of 50 ms (it finished" in (result.error or "")
    executor.close()
