"""MCP config files: Claude's `mcpServers` and VS Code's `servers` shapes, servers listed at once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools import ToolConfigError
from tests.echo_tools._mcp_support import SERVERS, make_executor, make_registry, server_python, stdio_config

RENDEZVOUS = SERVERS / "rendezvous_server.py"
TASKS = SERVERS / "tasks_server.py"


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(data))
    return path


def test_vs_codes_servers_shape_is_read(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    config = {"type": "stdio", **stdio_config()}
    added = registry.load_mcp_config(_write(tmp_path, {"servers": {"calc": config}, "inputs": []}))
    assert "calc" in added and added["calc"]
    assert all(t.execution_config["server"] == "calc" for t in added["calc"])


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ({"other": {}}, "it has neither"),
        ({"mcpServers": {}, "servers": {}}, "it has both 'mcpServers' and 'servers'"),
        ({"servers": ["x"]}, "it has 'servers' but not as an object"),
        ([], "it has neither"),
    ],
)
def test_a_file_without_one_servers_object_is_refused_naming_both_shapes(
    tmp_path: Path, data: object, says: str
) -> None:
    registry = make_registry(tmp_path)
    with pytest.raises(ToolConfigError, match=f"'mcpServers' .* or 'servers' .*{says}"):
        registry.load_mcp_config(_write(tmp_path, data))
    assert registry.list_mcp_servers() == {}


@pytest.mark.slow
def test_the_servers_of_a_file_are_listed_at_once(tmp_path: Path) -> None:
    # each server waits until all three have started: listed one after another, the first never answers
    meeting = tmp_path / "meeting"
    meeting.mkdir()
    servers = {
        name: {"command": server_python(1), "args": [str(RENDEZVOUS), str(meeting), "3", name], "timeout": 30}
        for name in ("one", "two", "three")
    }
    registry = make_registry(tmp_path)
    added = registry.load_mcp_config(_write(tmp_path, {"mcpServers": servers}))
    assert sorted(added) == ["one", "three", "two"]
    assert sorted(registry.list_mcp_servers()) == ["one", "three", "two"]


@pytest.mark.slow
async def test_a_tool_that_requires_mcp_tasks_is_registered_disabled_with_the_reason(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    tools = {t.execution_config["tool"]: t for t in registry.add_mcp_server("tasks", stdio_config(TASKS))}
    assert tools["quick"].status == "active"
    job = tools["long_job"]
    assert job.status == "disabled"
    assert "requires MCP tasks" in job.metadata["mcp"]["disabled_reason"]
    refreshed = {t.execution_config["tool"]: t for t in registry.refresh_mcp_server("tasks")}
    assert refreshed["long_job"].status == "disabled"
    executor = make_executor(registry)
    try:
        result = await executor.invoke(job.tool_id, {})
        assert result.error_type == "disabled"
        assert (await executor.invoke(tools["quick"].tool_id, {})).success
    finally:
        await executor.aclose()


@pytest.mark.parametrize("field", ["env", "headers"])
def test_an_unset_variable_is_a_config_error_naming_it_and_nothing_is_added(
    tmp_path: Path, field: str
) -> None:
    registry = make_registry(tmp_path)
    config = (
        stdio_config(env={"TOKEN": "${ECHO_TEST_UNSET_VARIABLE}"})
        if field == "env"
        else {
            "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": "Bearer ${ECHO_TEST_UNSET_VARIABLE}"},
        }
    )
    with pytest.raises(ToolConfigError, match="'ECHO_TEST_UNSET_VARIABLE', which is not set") as info:
        registry.add_mcp_server("svc", config)
    assert info.value.field.startswith(f"mcpServers.svc.{field}")
    with pytest.raises(ToolConfigError, match="ECHO_TEST_UNSET_VARIABLE"):
        registry.load_mcp_config(_write(tmp_path, {"mcpServers": {"svc": config}}))
    assert registry.list_mcp_servers() == {}
