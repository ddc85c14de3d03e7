"""`echo_tools.mcp.memory`: an SDK server object served over the SDK's in-memory transport stands in for
the configured process, for tests that need a protocol peer and not a process."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from echo_tools.errors import MCPConnectionError
from echo_tools.mcp.memory import in_memory_session, serve_in_memory
from tests.echo_tools._mcp_support import make_executor, make_registry, server_object


def test_a_server_served_in_memory_is_discovered_and_called_without_its_command(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    missing = {"command": str(tmp_path / "no-such-server")}  # would fail to start: no process is started
    with serve_in_memory("calc", server_object()):
        tools = registry.add_mcp_server("Calc", missing)
        executor = make_executor(registry)
        try:
            result = executor.invoke_sync("mcp_calc_add", {"a": 2, "b": 3})
            pid = executor.invoke_sync("mcp_calc_pid", {})
            failed = executor.invoke_sync("mcp_calc_fail", {"message": "refused on purpose"})
        finally:
            executor.close()
    assert "mcp_calc_add" in {tool.tool_id for tool in tools}
    assert result.success and result.output == {"result": 5.0}
    assert pid.output == {"result": os.getpid()}  # the server ran in this process
    assert not failed.success and "refused on purpose" in str(failed.error)
    assert registry.mcp_servers["calc"]["command"] == missing["command"]  # the configuration is kept as given


def test_after_the_block_a_session_uses_the_configured_command_again(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    with serve_in_memory("calc", server_object()):
        registry.add_mcp_server("calc", {"command": str(tmp_path / "no-such-server")})
    assert in_memory_session("calc") is None
    with pytest.raises(MCPConnectionError) as caught:
        registry.refresh_mcp_server("calc")
    assert "no-such-server" in caught.value.message


def test_a_second_server_under_the_same_name_is_refused_naming_it() -> None:
    with serve_in_memory("calc", server_object()):
        with pytest.raises(ValueError, match="'calc'"):
            with serve_in_memory("CALC", server_object()):
                pass
        assert in_memory_session("Calc") is not None


def test_the_docs_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", text[text.index("## In-memory servers") :], re.S)
    exec(compile(code, "docs/mcp.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out.splitlines() == ["{'result': 'Hello, Ada!'}"]
