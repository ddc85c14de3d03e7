"""MCP server configs: checks that name the field and value, the store beside the tools, redaction,
and how an MCP tool listing becomes ToolDefs (ids, names, tags, annotations, schemas).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import types

from echo_tools import MCPConnectionError, SideEffect, ToolConfigError, ToolNotFoundError, ToolStatus
from echo_tools.mcp.config import (
    apply_listing,
    check_server_config,
    check_server_name,
    list_mcp_servers,
    load_mcp_config,
    redact_config,
    register_server,
    remove_mcp_server,
    tool_defs,
)
from echo_tools.mcp.memory import serve_in_memory
from echo_tools.models import check_tool_id
from tests.echo_tools._mcp_support import make_executor, make_registry, server_object, stdio_config

# -- bad config ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["", "Bad Name", "../etc", "a" * 65, "-dash", 7])
def test_a_bad_server_name_is_refused_and_named(name: object) -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_name(name)
    assert repr(name) in caught.value.message
    assert caught.value.field == "mcpServers.name"


def test_a_server_name_is_lower_cased() -> None:
    assert check_server_name("  Calc-Server_2 ") == "calc-server_2"


def test_a_stdio_config_without_command_names_the_command_field() -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("calc", {"args": ["server.py"]})
    assert caught.value.field == "mcpServers.calc.command"
    assert "'calc'" in caught.value.message and "'command'" in caught.value.message


def test_a_command_that_is_not_a_string_is_refused_with_its_value() -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("calc", {"command": ["python", "server.py"]})
    assert caught.value.field == "mcpServers.calc.command"
    assert "['python', 'server.py']" in caught.value.message


def test_args_must_be_a_list_of_strings() -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("calc", {"command": "python", "args": ["server.py", 3]})
    assert caught.value.field == "mcpServers.calc.args"
    assert "['server.py', 3]" in caught.value.message


def test_env_values_must_be_strings() -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("calc", {"command": "python", "env": {"PORT": 8080}})
    assert caught.value.field == "mcpServers.calc.env"


def test_an_unknown_transport_is_refused_and_named() -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("web", {"url": "http://127.0.0.1:9/mcp", "transport": "websocket-ish"})
    assert caught.value.field == "mcpServers.web.transport"
    assert "'websocket-ish'" in caught.value.message


@pytest.mark.parametrize("url", ["ftp://example.com/mcp", "file:///tmp/x", "http://", "example.com/mcp", 5])
def test_a_url_without_an_http_scheme_or_host_is_refused(url: object) -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("web", {"url": url})
    assert caught.value.field == "mcpServers.web.url"
    assert repr(url) in caught.value.message


def test_a_bad_timeout_is_refused() -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("calc", {"command": "python", "timeout": 0})
    assert caught.value.field == "mcpServers.calc.timeout"


def test_the_transport_is_made_explicit_and_vs_code_type_is_read() -> None:
    assert check_server_config("a", {"command": "python"})["transport"] == "stdio"
    assert check_server_config("b", {"url": "https://x.example/mcp"})["transport"] == "streamable_http"
    assert check_server_config("c", {"url": "https://x.example/sse", "type": "sse"})["transport"] == "sse"
    assert check_server_config("d", {"url": "https://x.example/mcp", "type": "http"})["transport"] == (
        "streamable_http"
    )


def test_add_mcp_server_refuses_a_bad_config_before_starting_anything(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("calc", {"url": "gopher://example.com"})
    assert caught.value.field == "mcpServers.calc.url"
    assert not (tmp_path / "tools" / "mcp_servers.json").exists()
    assert registry.mcp_servers == {}


# -- store and redaction ---------------------------------------------------------------------------


def test_a_server_that_cannot_start_is_not_stored(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    with pytest.raises(MCPConnectionError) as caught:
        registry.add_mcp_server("ghost", {"command": str(tmp_path / "no-such-server")})
    assert "no-such-server" in caught.value.message
    assert list_mcp_servers(registry) == {}


def test_configs_are_stored_beside_the_tools_with_env_references_unresolved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_TEST_SECRET", "s3cret-value")
    registry = make_registry(tmp_path)
    config = stdio_config(env={"API_KEY": "${ECHO_TEST_SECRET}", "MODE": "plain-value"})
    tools = registry.add_mcp_server("Calc", config)
    assert tools
    stored = json.loads((tmp_path / "tools" / "mcp_servers.json").read_text())
    assert stored["mcpServers"]["calc"]["env"] == {"API_KEY": "${ECHO_TEST_SECRET}", "MODE": "plain-value"}
    assert "s3cret-value" not in (tmp_path / "tools" / "mcp_servers.json").read_text()
    # another registry on the same folder sees the server
    again = make_registry(tmp_path)
    listed = list_mcp_servers(again)
    assert listed["calc"]["transport"] == "stdio"
    assert listed["calc"]["config"]["env"] == {"API_KEY": "${ECHO_TEST_SECRET}", "MODE": "***"}
    assert "mcp_calc_add" in listed["calc"]["tools"]


def test_redaction_hides_literal_header_values_but_shows_references() -> None:
    config = {"url": "https://x.example/mcp", "headers": {"Authorization": "Bearer abc", "X-Key": "${KEY}"}}
    assert redact_config(config)["headers"] == {"Authorization": "***", "X-Key": "${KEY}"}
    assert config["headers"]["Authorization"] == "Bearer abc"


def test_refreshing_an_unknown_server_names_it() -> None:
    registry = make_registry()
    with pytest.raises(ToolNotFoundError) as caught:
        registry.refresh_mcp_server("nowhere")
    assert "'nowhere'" in caught.value.message


def test_load_mcp_config_checks_every_entry_before_adding_any(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps({"mcpServers": {"calc": stdio_config(), "broken": {"transport": "carrier-pigeon"}}})
    )
    registry = make_registry(tmp_path)
    with pytest.raises(ToolConfigError) as caught:
        load_mcp_config(registry, path)
    assert caught.value.field == "mcpServers.broken.transport"
    assert registry.list_all() == []


def test_load_mcp_config_adds_every_server_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"calc": stdio_config()}}))
    registry = make_registry()  # in memory: configs live in registry.mcp_servers only
    with serve_in_memory("calc", server_object()):  # a protocol peer is all the loading needs
        added = registry.load_mcp_config(path)
    assert sorted(added) == ["calc"]
    assert registry.mcp_servers["calc"]["transport"] == "stdio"
    assert registry.get("mcp_calc_add") is not None


def test_load_mcp_config_adds_the_reachable_servers_and_names_the_others(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    ghost = {"command": str(tmp_path / "no-such-server")}
    path.write_text(json.dumps({"mcpServers": {"calc": stdio_config(), "ghost": ghost}}))
    registry = make_registry()
    with serve_in_memory("calc", server_object()), pytest.raises(MCPConnectionError) as caught:
        registry.load_mcp_config(path)  # calc in memory, ghost's command really fails to start
    assert "1 of 2" in caught.value.message and "'ghost'" in caught.value.message
    assert "added: ['calc']" in caught.value.message
    assert sorted(registry.mcp_servers) == ["calc"]


# -- listing -> ToolDefs ---------------------------------------------------------------------------


def _tool(name: str, **fields: object) -> types.Tool:
    return types.Tool(name=name, inputSchema={"type": "object", "properties": {}}, **fields)  # type: ignore[arg-type]


def test_mcp_tools_become_tooldefs_with_ids_tags_and_mapped_annotations() -> None:
    listing = [
        _tool("add", title="Add numbers", annotations=types.ToolAnnotations(readOnlyHint=True)),
        _tool("save", annotations=types.ToolAnnotations(idempotentHint=True)),
        _tool("launch", description="Launch it", outputSchema={"type": "object"}),
    ]
    add, save, launch = tool_defs("calc-1", listing)
    assert (add.tool_id, add.name, add.side_effect) == ("mcp_calc-1_add", "calc-1_add", SideEffect.PURE)
    assert add.description == "Add numbers"
    assert add.tags == ["source:mcp", "mcp_server:calc-1"]
    assert add.execution_config == {"server": "calc-1", "tool": "add"}
    assert [p.value for p in add.permissions] == ["mcp:connect"]
    assert save.side_effect == SideEffect.IDEMPOTENT
    assert launch.side_effect == SideEffect.EXTERNAL and launch.output_schema == {"type": "object"}
    assert launch.description == "Launch it"


def test_tool_names_that_slug_alike_get_distinct_ids_and_names() -> None:
    first, second, odd = tool_defs("srv", [_tool("get-data"), _tool("get_data"), _tool("日本")])
    assert first.tool_id == "mcp_srv_get_data"
    assert second.tool_id.startswith("mcp_srv_get_data_") and second.tool_id != first.tool_id
    assert first.slug != second.slug
    assert check_tool_id(odd.tool_id) == odd.tool_id
    registry = make_registry()
    assert len(apply_listing(registry, "srv", [_tool("get-data"), _tool("get_data"), _tool("日本")])) == 3


def test_a_vanished_tool_is_disabled_and_comes_back_active() -> None:
    registry = make_registry()
    apply_listing(registry, "srv", [_tool("one"), _tool("two")])
    apply_listing(registry, "srv", [_tool("one")])
    gone = registry.get("mcp_srv_two")
    assert gone is not None and gone.status == ToolStatus.DISABLED
    assert gone.metadata["mcp"]["missing"] is True
    apply_listing(registry, "srv", [_tool("one"), _tool("two")])
    back = registry.get("mcp_srv_two")
    assert back is not None and back.status == ToolStatus.ACTIVE


def test_a_refresh_keeps_a_status_the_user_set() -> None:
    registry = make_registry()
    (one,) = apply_listing(registry, "srv", [_tool("one")])
    registry.register(one.model_copy(update={"status": ToolStatus.DEPRECATED, "timeout_ms": 1234}))
    (again,) = apply_listing(registry, "srv", [_tool("one", description="new text")])
    assert again.status == ToolStatus.DEPRECATED and again.timeout_ms == 1234
    assert again.description == "new text"


def test_removing_a_server_forgets_its_config_and_disables_its_tools(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    register_server(registry, "srv", stdio_config(), [_tool("one"), _tool("two")])
    assert remove_mcp_server(registry, "srv") == ["mcp_srv_one", "mcp_srv_two"]
    assert list_mcp_servers(make_registry(tmp_path)) == {}
    assert {t.status for t in registry.list_by_type("mcp")} == {ToolStatus.DISABLED}


async def test_a_tool_whose_server_is_not_configured_fails_naming_the_server() -> None:
    registry = make_registry()
    registry.register(
        {"name": "orphan", "tool_type": "mcp", "execution_config": {"server": "nowhere", "tool": "x"}}
    )
    executor = make_executor(registry)
    try:
        result = await executor.invoke("orphan", {})
        assert not result.success and result.error_type == "execution"
        assert "'nowhere'" in (result.error or "") and "not configured" in (result.error or "")
    finally:
        await executor.aclose()


def test_the_registry_lists_and_removes_servers_through_its_own_methods(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    register_server(registry, "srv", stdio_config(), [_tool("one")])
    reopened = make_registry(tmp_path)
    assert list(reopened.list_mcp_servers()) == ["srv"]  # read back from mcp_servers.json
    assert reopened.remove_mcp_server("srv") == ["mcp_srv_one"]
    assert make_registry(tmp_path).list_mcp_servers() == {}
