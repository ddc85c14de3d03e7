"""Canvas MCP Server tool entries: the server's tool binds; a `serverUrl` adds the server under the egress
policy; everything else is an error naming the node and the entry. Real MCP servers over stdio and HTTP."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from echo_tools import EgressPolicy, ToolRegistry
from tests.echo_tools._mcp_support import (
    HttpServer,
    add_listed_server,
    make_executor,
    make_registry,
    stdio_config,
)
from tests.workflow_bridge._mapper_support import chain, node
from workflow_bridge.node_mapper import NodeMapper

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server() -> Iterator[HttpServer]:
    running = HttpServer().start()
    yield running
    running.stop()


def _entry(**config: Any) -> dict[str, Any]:
    return {"id": 3, "name": "Calc", "type": "mcp_server", "enabled": True, "config": config}


def _map(registry: ToolRegistry, entry: dict[str, Any]) -> Any:
    return NodeMapper(registry).map_canvas(
        chain(
            node("n1", "Agent", "Adder", tools=[entry], model={"modelName": "rehearsal"}), workflow_id="wf_m"
        )
    )


def _tools(mapped: Any) -> list[str]:
    (only,) = mapped.agents.values()
    return list(only["tools"])


def test_an_entry_binds_the_registered_servers_tool(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    add_listed_server(registry, "calc", stdio_config())  # the mapper reads the registry, not the server
    mapped = _map(registry, _entry(serverId="calc", operationName="add"))
    assert mapped.ok, mapped.diagnostics
    assert _tools(mapped) == ["mcp_calc_add"]


def test_an_unknown_operation_of_a_registered_server_is_an_error_naming_it(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    add_listed_server(registry, "calc", stdio_config())  # the mapper reads the registry, not the server
    mapped = _map(registry, _entry(serverId="calc", operationName="ad"))

    (error,) = mapped.errors
    assert error.node_id == "n1" and error.field == "config.tools[0].config.operationName"
    assert "'n1'" in error.message and "config.tools[0]" in error.message
    assert "no operation 'ad'" in error.message and "did you mean 'add'?" in error.message
    assert _tools(mapped) == []


def test_an_unregistered_server_without_a_url_is_an_error_saying_what_to_do(tmp_path: Path) -> None:
    mapped = _map(make_registry(tmp_path), _entry(serverId="files", operationName="read_file"))
    (error,) = mapped.errors
    assert error.field == "config.tools[0].config.serverId"
    assert "no MCP server 'files' is registered" in error.message and "serverUrl" in error.message


def test_a_server_url_adds_the_server_and_binds_its_tool_which_runs(
    tmp_path: Path, server: HttpServer
) -> None:
    registry = make_registry(tmp_path)  # its egress policy allows loopback explicitly
    mapped = _map(registry, _entry(serverId="web", operationName="add", serverUrl=server.url))

    assert mapped.ok, mapped.diagnostics
    assert _tools(mapped) == ["mcp_web_add"]
    assert registry.mcp_servers["web"] == {"url": server.url, "transport": "streamable_http"}
    again = _map(registry, _entry(serverId="web", operationName="greet", serverUrl=server.url))
    assert again.ok and _tools(again) == ["mcp_web_greet"]  # bound from the server now registered
    executor = make_executor(registry)
    result = executor.invoke_sync("mcp_web_add", {"a": 1, "b": 2})
    assert result.success and result.output == {"result": 3.0}
    executor.close()


def test_a_loopback_server_url_is_refused_by_the_default_egress_policy(
    tmp_path: Path, server: HttpServer
) -> None:
    registry = ToolRegistry(tmp_path / "tools", egress=EgressPolicy())
    mapped = _map(registry, _entry(serverId="web", operationName="add", serverUrl=server.url))

    (error,) = mapped.errors
    assert error.field == "config.tools[0].config.serverUrl"
    assert repr(server.url) in error.message and "loopback" in error.message
    assert registry.mcp_servers == {} and not (tmp_path / "tools" / "mcp_servers.json").exists()


def test_a_server_without_the_operation_is_not_added(tmp_path: Path, server: HttpServer) -> None:
    registry = make_registry(tmp_path)
    mapped = _map(registry, _entry(serverId="web", operationName="multiply", serverUrl=server.url))

    (error,) = mapped.errors
    assert error.field == "config.tools[0].config.operationName"
    assert "no operation 'multiply'" in error.message and "nothing was added" in error.message
    assert registry.mcp_servers == {} and registry.list_by_type("mcp") == []


@pytest.mark.parametrize("url", ["gopher://example.org/mcp", "not a url"])
def test_a_server_url_that_is_not_http_is_an_error_naming_it(tmp_path: Path, url: str) -> None:
    mapped = _map(make_registry(tmp_path), _entry(serverId="web", operationName="add", serverUrl=url))
    (error,) = mapped.errors
    assert error.field == "config.tools[0].config.serverUrl" and repr(url) in error.message


def test_a_server_url_where_nothing_listens_is_an_error(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port that was free a moment ago and has no listener
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    registry = make_registry(tmp_path)
    mapped = _map(registry, _entry(serverId="web", operationName="add", serverUrl=url))
    (error,) = mapped.errors
    assert error.field == "config.tools[0].config.serverUrl" and "cannot be added" in error.message
    assert registry.mcp_servers == {}


def test_an_agent_calls_the_tool_of_a_server_added_from_its_url(tmp_path: Path, server: HttpServer) -> None:
    """Through a real compiled LangGraph graph and a real CrewAI agent on the rehearsal model."""
    from workflow_bridge.runner import run_workflow

    registry = make_registry(tmp_path)
    executor = make_executor(registry)
    canvas = chain(
        node("n1", "Agent", "Adder", model={"modelName": "rehearsal"},
             tools=[_entry(serverId="web", operationName="add", serverUrl=server.url)]),
        workflow_id="wf_m",
    )  # fmt: skip
    events: list[dict[str, Any]] = []
    state = run_workflow(canvas, registry=registry, executor=executor, user_input='Add {"a": 2, "b": 5}',
                         on_event=events.append)  # fmt: skip
    assert [e["tool_id"] for e in events if e["type"] == "tool.completed"] == ["mcp_web_add"]
    assert "7" in state["crew_result"]
    executor.close()
