"""Every route declares its action to the gate: the app's own routes, the plugged-in `/workflows` router,
the routes `workflow_bridge.echoai.mount` adds to a host's app. A route that declares none fails here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.gate import ACTIONS, PUBLIC, READ
from echo_tools.settings import ApiSettings
from tests.echo_tools._api_support import ECHO, make_registry


def _calls(dependant: Any) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def declared_actions(app: FastAPI) -> dict[str, set[str]]:
    """`"METHOD path"` -> the actions its gate dependencies declare, for every route of `app`."""
    found: dict[str, set[str]] = {}
    for route in iter_route_contexts(app.routes):  # included routers' routes with their prefixes
        if not isinstance(route.original_route, APIRoute):
            continue
        actions = {getattr(c, "gate_action", None) for c in _calls(route.dependant)} - {None}
        for method in route.methods or ():
            found[f"{method} {route.path}"] = actions
    return found


def assert_every_route_declares_one_action(app: FastAPI) -> dict[str, set[str]]:
    found = declared_actions(app)
    missing = sorted(route for route, actions in found.items() if not actions)
    assert not missing, f"routes that declare no action to the gate: {missing}"
    several = sorted(route for route, actions in found.items() if len(actions) > 1)
    assert not several, f"routes that declare two actions: {several}"
    for actions in found.values():
        assert actions <= {*ACTIONS, READ, PUBLIC}
    return found


def test_every_route_of_create_app_declares_its_action(tmp_path: Path) -> None:
    registry = make_registry(tmp_path / "tools", ECHO)
    app = create_app(registry, ToolExecutor(registry), ApiSettings(api_key="k" * 16))
    found = assert_every_route_declares_one_action(app)
    assert found["POST /tools/invoke/{name}"] == {"invoke"}
    assert found["POST /tools/register"] == {"register"}
    assert found["POST /tools/credentials"] == {"credentials"}
    assert found["POST /tools/credentials/{name}/connect"] == {"credentials"}
    assert found["POST /tools/credentials/{name}/connect/finish"] == {"credentials"}
    assert found["POST /tools/import/openapi"] == {"import"}
    assert found["GET /tools/health"] == {PUBLIC}
    assert found["POST /workflows/run"] == {"run"}  # the plugged-in router is enumerated too
    assert found["POST /workflows/compile"] == {"compile"}
    assert found["POST /workflows/runs/{run_id}/resume"] == {"approve"}


def test_every_route_mount_adds_to_a_host_app_declares_its_action(tmp_path: Path) -> None:
    from workflow_bridge import echoai

    host = FastAPI()

    @host.get("/host/own")
    async def own() -> dict[str, str]:
        return {}

    echoai.mount(host, storage_dir=tmp_path / "tools", api_key="k" * 16)
    found = declared_actions(host)
    assert found.pop("GET /host/own") == set()  # the host's own route is not ours to gate
    ours = {route: actions for route, actions in found.items() if not actions}
    assert not ours, f"mounted routes that declare no action to the gate: {sorted(ours)}"
    assert found["POST /workflows/run"] == {"run"}
    assert found["DELETE /tools/credentials/{name}"] == {"credentials"}


def test_a_route_without_an_action_is_found(tmp_path: Path) -> None:
    registry = make_registry(tmp_path / "tools", ECHO)
    app = create_app(registry, ToolExecutor(registry), ApiSettings(api_key="k" * 16))

    @app.get("/tools/forgotten")
    async def forgotten() -> dict[str, str]:
        return {}

    found = declared_actions(app)
    assert found["GET /tools/forgotten"] == set()


def test_the_gate_reads_a_request_s_headers_once_as_starlette_would() -> None:
    from starlette.datastructures import Headers

    from echo_tools.api.security import _gate_headers, presented_key

    cases = [
        [(b"x-api-key", b"k1"), (b"x-api-key", b"k2"), (b"host", b"127.0.0.1:80"), (b"content-length", b"7")],
        [(b"authorization", b"Bearer  tok "), (b"x-echo-user", b"u1"), (b"x-echo-user", b"u2")],
        [(b"authorization", b"Basic abc"), (b"x-api-key", b"")],
        [(b"x-api-key", b""), (b"authorization", b"bearer t2")],
        [(b"x-api-key", b""), (b"x-api-key", b"second"), (b"authorization", b"Bearer t3")],
        [],
    ]
    for raw in cases:
        headers = Headers(raw=raw)
        expected = (headers.get("content-length"), presented_key(headers), headers.get("host"),
                    headers.get("x-echo-user"))  # fmt: skip
        assert _gate_headers(raw) == expected, raw
