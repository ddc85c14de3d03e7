"""Canvas `mcp_server` entries with `serverUrl` under the gate, through a real server: a principal granted
`mcp` adds the server owned by it (nobody else may replace or remove it); without `mcp`, and in every
compile, the server binds for that compile or run only and nothing is stored or listed afterwards.
A real MCP server over streamable HTTP on 127.0.0.1 and a real uvicorn server."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import EgressPolicy, ToolRegistry
from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.gate import Grants, Principal, ToolOwnedError, acting_as, hash_key, principals_from
from echo_tools.mcp.bound import bound_scope
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools._mcp_support import HttpServer
from tests.echo_tools.test_api_server import sse_frames
from tests.workflow_bridge._mapper_support import chain, node

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from workflow_bridge.node_mapper import NodeMapper

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning"),
]

OPERATOR = {"X-API-Key": "operator-key-0123456789"}
TEAM = {"X-API-Key": "team-key-0123456789"}  # may add MCP servers
OTHER = {"X-API-Key": "other-key-0123456789"}  # may too, and register tools
IDE = {"X-API-Key": "ide-key-0123456789"}  # may run and compile, not add MCP servers
PRINCIPALS = {
    "principals": [
        {"name": "team", "key_sha256": hash_key(TEAM["X-API-Key"]), "actions": ["run", "mcp", "compile"]},
        {"name": "other", "key_sha256": hash_key(OTHER["X-API-Key"]), "actions": ["run", "mcp", "register"]},
        {"name": "ide", "key_sha256": hash_key(IDE["X-API-Key"]), "actions": ["invoke", "run", "compile"]},
    ]
}  # fmt: skip
SETTINGS = ApiSettings(api_key=OPERATOR["X-API-Key"], principals=principals_from(PRINCIPALS))


@pytest.fixture(scope="module")
def mcp_server() -> Iterator[HttpServer]:
    running = HttpServer().start()
    yield running
    running.stop()


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    return ToolRegistry(tmp_path / "tools", egress=EgressPolicy.local())  # loopback allowed, explicitly


@pytest.fixture
def api(registry: ToolRegistry) -> Iterator[str]:
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    with support.serve_in_thread(create_app(registry, executor, SETTINGS)) as url:
        yield url
    executor.close()


def _canvas(url: str, server: str = "web") -> dict[str, Any]:
    entry = {"id": 3, "name": "Calc", "type": "mcp_server", "enabled": True,
             "config": {"serverId": server, "operationName": "add", "serverUrl": url}}  # fmt: skip
    return chain(
        node("n1", "Agent", "Adder", tools=[entry], model={"modelName": "rehearsal"}), workflow_id="w"
    )


def _run(api: str, headers: dict[str, str], canvas: dict[str, Any]) -> list[dict[str, Any]]:
    body = {**canvas, "user_input": 'Add {"a": 2, "b": 5}'}
    with httpx.Client(base_url=api, timeout=120, headers=headers) as http:
        with http.stream("POST", "/workflows/run", json=body) as stream:
            assert stream.status_code == 200
            return list(sse_frames(stream.iter_lines()))


def _completed(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f["data"] for f in frames if f["event"] == "tool.completed"]


# -- 1. an MCP server a canvas adds is owned by who added it --------------------------------------------


def test_a_server_a_canvas_adds_records_its_owner_on_the_server_and_its_tools(
    api: str, registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    frames = _run(api, TEAM, _canvas(mcp_server.url))
    assert [c["tool_id"] for c in _completed(frames)] == ["mcp_web_add"]
    assert registry.mcp_servers["web"]["owner"] == "team"
    assert {t.owner for t in registry.list_by_type("mcp")} == {"team"}
    stored = json.loads((Path(registry.storage.directory) / "mcp_servers.json").read_text())  # type: ignore[union-attr]
    assert "team" in json.dumps(stored)


def test_another_principal_may_neither_replace_nor_remove_the_server(
    api: str, registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    _run(api, TEAM, _canvas(mcp_server.url))
    other = Principal("other", Grants(actions=["run", "mcp", "register"]))
    with acting_as(other):
        with pytest.raises(ToolOwnedError, match="owned by 'team'") as removing:
            registry.remove_mcp_server("web")
        with pytest.raises(ToolOwnedError, match="principal 'other'"):
            registry.add_mcp_server("web", {"url": "http://127.0.0.1:9/mcp"})
    assert removing.value.field == "server" and removing.value.error_type == "owned"
    assert registry.mcp_servers["web"]["url"] == mcp_server.url
    tool = registry.require("mcp_web_add").to_storage_dict()
    response = httpx.post(f"{api}/tools/register", json={**tool, "description": "mine now"}, headers=OTHER)
    assert response.status_code == 409 and response.json()["error_type"] == "owned"
    assert "owned by 'team'" in response.json()["message"]
    assert registry.require("mcp_web_add").description != "mine now"
    with acting_as(Principal("team", Grants(actions=["mcp"]))):  # the owner may
        disabled = registry.remove_mcp_server("web")
    assert "mcp_web_add" in disabled and "web" not in registry.mcp_servers


def test_a_config_cannot_claim_an_owner_of_its_own(registry: ToolRegistry, mcp_server: HttpServer) -> None:
    from echo_tools.mcp.config import register_server
    from tests.echo_tools._mcp_support import CALC, tool_listing

    with acting_as(Principal("ide", Grants(actions=["mcp"]))):
        register_server(registry, "calc", {"url": mcp_server.url, "owner": "team"}, tool_listing(CALC))
    assert registry.mcp_servers["calc"]["owner"] == "ide"


def test_a_server_name_of_a_bound_server_is_refused(registry: ToolRegistry) -> None:
    from echo_tools.errors import ToolConfigError

    with pytest.raises(ToolConfigError, match="bound-") as refused:
        registry.add_mcp_server("bound-x", {"url": "http://127.0.0.1:9/mcp"})
    assert refused.value.field == "mcpServers.name" and registry.mcp_servers == {}


# -- 2. without `mcp`, and in a compile, the server binds for that compile or run only -------------------


def test_a_run_without_the_mcp_action_binds_the_server_for_the_run_only(
    api: str, registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    frames = _run(api, IDE, _canvas(mcp_server.url))
    (done,) = _completed(frames)
    assert done["output"] == {"result": 7.0} and done["tool_id"].startswith("mcp_bound-")
    assert frames[-1]["event"] == "run.completed", frames[-1]
    assert registry.list_mcp_servers() == {} and registry.list_by_type("mcp") == []
    assert not (Path(registry.storage.directory) / "mcp_servers.json").exists()  # type: ignore[union-attr]
    listed = httpx.get(f"{api}/tools/list", headers=IDE).json()
    assert not [t for t in listed if "mcp" in t["tool_id"]]
    later = httpx.post(f"{api}/tools/invoke/id/{done['tool_id']}", json={"input_data": {"a": 1, "b": 1}},
                       headers=IDE)  # fmt: skip
    assert later.status_code == 404  # gone with its run


def test_a_compile_binds_the_server_for_the_compile_only_even_for_a_principal_with_mcp(
    api: str, registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    for headers in (IDE, TEAM, OPERATOR):
        response = httpx.post(f"{api}/workflows/compile", json=_canvas(mcp_server.url), headers=headers)
        assert response.status_code == 200, response.text
    assert registry.list_mcp_servers() == {} and registry.list_by_type("mcp") == []
    assert not (Path(registry.storage.directory) / "mcp_servers.json").exists()  # type: ignore[union-attr]


def test_a_bound_server_still_passes_the_egress_policy(tmp_path: Path, mcp_server: HttpServer) -> None:
    registry = ToolRegistry(tmp_path / "tools", egress=EgressPolicy())  # no loopback
    with acting_as(Principal("ide", Grants(actions=["run"]))), bound_scope("r1", "ide") as scope:
        mapped = NodeMapper(registry).map_canvas(_canvas(mcp_server.url))
    (error,) = mapped.errors
    assert error.field == "config.tools[0].config.serverUrl" and "loopback" in error.message
    assert scope.servers == {} and registry.mcp_servers == {}


def test_a_bound_server_s_tool_is_not_another_principal_s_to_call(
    registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from echo_tools.models import ToolContext

    executor = ToolExecutor(registry, egress=EgressPolicy.local())

    def call(tool_id: str, principal: str) -> Any:  # a thread of its own: found by run id, as an agent's
        context = ToolContext(run_id="r2", principal=principal)
        with ThreadPoolExecutor(1) as pool:
            return pool.submit(executor.invoke_sync, tool_id, {"a": 1, "b": 2}, context).result()

    try:
        with acting_as(Principal("ide", Grants(actions=["run"]))), bound_scope("r2", "ide") as scope:
            mapped = NodeMapper(registry).map_canvas(_canvas(mcp_server.url))
            (tool_id,) = list(next(iter(mapped.agents.values()))["tools"])
            own, stranger = call(tool_id, "ide"), call(tool_id, "mallory")
        after = call(tool_id, "ide")
    finally:
        executor.close()
    assert own.success and own.output == {"result": 3.0}
    assert list(scope.tools) == [t for t in scope.tools if t.startswith("mcp_bound-")]
    assert registry.get(tool_id) is None and registry.mcp_servers == {}
    assert not stranger.success and stranger.error_type == "not_found"
    assert not after.success and after.error_type == "not_found"


def test_a_bound_server_s_calls_count_on_the_run_s_budget(
    registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    from echo_tools.gate import Budget, BudgetMeter
    from echo_tools.models import ToolContext

    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    context = ToolContext(run_id="r4", principal="ide", budget=BudgetMeter(Budget(max_calls=1)))
    try:
        with acting_as(Principal("ide", Grants(actions=["run"]))), bound_scope("r4", "ide"):
            mapped = NodeMapper(registry).map_canvas(_canvas(mcp_server.url))
            (tool_id,) = list(next(iter(mapped.agents.values()))["tools"])
            first = executor.invoke_sync(tool_id, {"a": 1, "b": 2}, context)
            second = executor.invoke_sync(tool_id, {"a": 1, "b": 2}, context)
    finally:
        executor.close()
    assert first.success and not second.success
    assert second.error_type == "budget" and "max_calls=1" in str(second.error)


def test_a_second_entry_on_a_bound_server_binds_without_listing_it_again_or_names_its_operations(
    registry: ToolRegistry, mcp_server: HttpServer
) -> None:
    entries = [
        {"id": i, "name": f"Calc {i}", "type": "mcp_server", "enabled": True,
         "config": {"serverId": "web", "operationName": op, "serverUrl": mcp_server.url}}
        for i, op in enumerate(["add", "greet", "ad"], start=3)
    ]  # fmt: skip
    canvas = chain(
        node("n1", "Agent", "Adder", tools=entries, model={"modelName": "rehearsal"}), workflow_id="w"
    )
    with (
        acting_as(Principal("ide", Grants(actions=["compile"])), stores=False),
        bound_scope(None, "ide") as scope,
    ):
        mapped = NodeMapper(registry).map_canvas(canvas)
    (error,) = mapped.errors
    assert error.field == "config.tools[2].config.operationName" and "did you mean 'add'?" in error.message
    assert {"web_add", "web_greet"} <= {t.name for t in scope.tools.values()}
    assert len(next(iter(mapped.agents.values()))["tools"]) == 2
    assert len(scope.servers) == 1 and registry.mcp_servers == {}
