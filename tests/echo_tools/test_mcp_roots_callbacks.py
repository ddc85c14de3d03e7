"""`roots/list` from real MCP servers: the folders under `roots` in the server's config answer it; without
them the client declares no roots, and a server asking anyway gets an error, not a hang.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools import EgressPolicy, ToolExecutor
from echo_tools.errors import ToolConfigError
from tests.echo_tools._mcp_support import (
    SERVERS,
    add_listed_server,
    everything_config,
    make_registry,
    stdio_config,
)

ASKING = SERVERS / "asking_server.py"


def roots_of(tmp_path: Path, config: dict) -> object:
    """The server's answer to `roots/list` during a call (the roots are asked for then, so the tools come
    from the cached listing; each test still starts the server for its call, with its own config)."""
    registry = make_registry(tmp_path)
    add_listed_server(registry, "asking", config)
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        result = executor.invoke_sync("mcp_asking_roots", {})
    finally:
        executor.close()
    assert result.success, result.error
    return json.loads(result.output["result"])


def test_configured_folders_answer_roots_list(tmp_path):
    data, notes = tmp_path / "data", tmp_path / "notes"
    listed = roots_of(tmp_path, stdio_config(ASKING, roots=[str(data), notes.as_uri()]))
    assert listed == [{"uri": data.as_uri(), "name": "data"}, {"uri": notes.as_uri(), "name": "notes"}]


def test_an_empty_list_declares_roots_and_answers_none(tmp_path):
    assert roots_of(tmp_path, stdio_config(ASKING, roots=[])) == []


def test_without_roots_configured_the_server_asking_gets_an_error(asking):
    registry, executor, _ = asking  # the session's asking server: configured without roots
    assert "roots" not in registry.mcp_servers["asking"]
    result = executor.invoke_sync("mcp_asking_roots", {})
    assert result.success, result.error
    listed = json.loads(result.output["result"])
    assert isinstance(listed, dict) and "roots not supported" in listed["error"].lower()


@pytest.mark.parametrize(
    ("roots", "shown"),
    [("/srv/data", "'/srv/data'"), (["relative/folder"], "'relative/folder'"), ([7], "7")],
)
def test_a_bad_roots_entry_names_the_field_and_the_value(tmp_path, roots, shown):
    registry = make_registry(tmp_path)
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("asking", stdio_config(ASKING, roots=roots))
    assert caught.value.field == "mcpServers.asking.roots"
    assert f"got {shown}" in caught.value.message


@pytest.mark.slow
def test_server_everything_lists_its_roots_tool_only_when_roots_are_configured(tmp_path, everything):
    plain, _ = everything  # the session's server-everything, configured without roots
    registry = make_registry(tmp_path)
    rooted = registry.add_mcp_server("rooted", everything_config(roots=[str(tmp_path)]))
    assert "mcp_everything_get_roots_list" not in {
        t.tool_id for t in plain.list_by_tags(["mcp_server:everything"])
    }
    assert "mcp_rooted_get_roots_list" in {t.tool_id for t in rooted}
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        result = executor.invoke_sync("mcp_rooted_get_roots_list", {})
    finally:
        executor.close()
    assert result.success and tmp_path.as_uri() in json.dumps(result.output)
