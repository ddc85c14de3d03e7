"""Every route declares its action to the gate: the app's own routes, the plugged-in `/workflows` router,
the routes `workflow_bridge.echoai.mount` adds to a host's app. A route that declares none fails here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from echo_tools.api import create_app
from echo_tools.executor import ToolExecutor
from echo_tools.gate import ACTIONS, PUBLIC, READ
from echo_tools.settings import ApiSettings
from tests.echo_tools._api_support import ECHO, local_tool, make_registry


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


# -- reads are owned: one test over every GET route, with two principals ------------------------------------

ALICE_KEY, BOB_KEY, OPERATOR_KEY = "alice-key-0123456789", "bob-key-0123456789", "operator-key-0123456789"
MARK = "7f3alice"  # in every name and text of alice's data: none may reach bob
SECRET = f"{MARK}-secret-input"
BOB_MARK = "bob-sentinel"
EVERY_ACTION = ["invoke", "run", "register", "import", "credentials", "mcp", "history", "approve", "compile"]
APPROVED = local_tool("Approved Echo", "echo", {"text": {"type": "string"}}, approval="always")
ONE_CALL = {
    "workflow": {"workflow_id": "wf_one", "name": "One", "execution_model": "sequential",
                 "agents": ["agt_one"], "connections": []},
    "agents": {"agt_one": {"agent_id": "agt_one", "name": "Echoer", "role": "Echoer", "goal": "echo",
                           "prompt": "Call the echo tool.", "tools": ["tool_echo"],
                           "metadata": {"node_type": "Agent"}}},
}  # fmt: skip
# a value for each path parameter of a GET route ({run_id} and {approval_id}: alice's, filled in below);
# a new route with another parameter fails the test until it is added here
PATH_VALUES = {"tool_id": ["tool_echo"], "name": ["app.js"], "tool_type": ["local"], "agent_id": ["agt_x"]}
# query parameters given to every route that declares them (`run_id`: each of alice's runs as well)
QUERY_VALUES = {"since": "2000-01-01T00:00:00Z", "max_events": "1000"}


def two_principal_settings() -> ApiSettings:
    from echo_tools.gate import hash_key, principals_from

    principals = principals_from(
        {"principals": [{"name": "alice", "key_sha256": hash_key(ALICE_KEY), "actions": EVERY_ACTION},
                        {"name": "bob", "key_sha256": hash_key(BOB_KEY), "actions": EVERY_ACTION}]}
    )  # fmt: skip
    return ApiSettings(api_key=OPERATOR_KEY, principals=principals, sse_ping_seconds=0.2)


def built_by_create_app(tmp_path: Path) -> tuple[FastAPI, Any]:
    from echo_tools.history import RunHistory

    registry = make_registry(tmp_path / "tools", ECHO, APPROVED)
    history = RunHistory(tmp_path / "tools")
    executor = ToolExecutor(registry, event_sinks=[history])
    return create_app(registry, executor, two_principal_settings(), history=history), history


def built_by_mount(tmp_path: Path) -> tuple[FastAPI, Any]:
    from tests.echo_tools._api_support import MODULE
    from workflow_bridge import echoai

    host = FastAPI()
    layer = echoai.layer_for(tmp_path / "mounted", allowed_modules=("AgentTools", MODULE))
    layer.registry.register(ECHO)
    layer.registry.register(APPROVED)
    echoai.mount(host, storage_dir=tmp_path / "mounted", settings=two_principal_settings())
    return host, layer.history


def get_routes(app: FastAPI) -> list[tuple[str, list[str], list[str]]]:
    """`(path, path parameters, query parameters)` of every GET route of `app` (included routers too)."""
    found = []
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, APIRoute) and "GET" in (route.methods or ()):
            dependant = route.dependant
            queries = sorted({p.name for d in [dependant, *_dependants(dependant)] for p in d.query_params})
            found.append((route.path, [p.name for p in dependant.path_params], queries))
    return sorted(found)


def _dependants(dependant: Any) -> Iterator[Any]:
    for dependency in dependant.dependencies:
        yield dependency
        yield from _dependants(dependency)


def alice_creates_her_data(url: str, history: Any) -> dict[str, list[str]]:
    """Alice's calls (one in a run of her own naming), her workflow run, an approval and a credential,
    each made through the routes; then bob's own, after hers. Returns alice's run and approval ids."""
    import httpx

    alice, bob = {"X-API-Key": ALICE_KEY}, {"X-API-Key": BOB_KEY}
    with httpx.Client(base_url=url, timeout=120) as http:
        called = http.post("/tools/invoke/tool_echo", params={"run_id": f"run-{MARK}"}, json={"text": SECRET},
                           headers=alice)  # fmt: skip
        assert called.status_code == 200, called.text
        ran = http.post("/workflows/run", headers=alice,
                        json={**ONE_CALL, "run_id": f"wfrun-{MARK}", "user_input": f'echo {{"text": "{SECRET}"}}'})  # fmt: skip
        assert ran.status_code == 200 and "run.completed" in ran.text, ran.text[-400:]
        asked = http.post("/tools/invoke/tool_approved_echo", json={"text": SECRET}, headers=alice)
        assert asked.status_code == 202, asked.text
        approval = asked.json()["result"]["metadata"]["approval_id"]
        stored = http.post("/tools/credentials", headers=alice,
                           json={"name": f"cred-{MARK}", "credential": {"type": "bearer", "token": SECRET}})  # fmt: skip
        assert stored.status_code == 200, stored.text
        # bob's own data, after alice's: the sentinel every stream of his reads up to
        ran = http.post("/workflows/run", headers=bob,
                        json={**ONE_CALL, "run_id": f"wfrun-{BOB_MARK}", "user_input": f'echo {{"text": "{BOB_MARK}"}}'})  # fmt: skip
        assert ran.status_code == 200, ran.text[-400:]
    history.flush()
    return {"run_id": [f"run-{MARK}", f"wfrun-{MARK}"], "approval_id": [approval]}


def read_as(url: str, path: str, query: dict[str, str], key: str, streaming: bool) -> tuple[int, str]:
    """One GET as the principal of `key`: its status and text (a stream's frames up to bob's sentinel,
    which bob's call after opening it brings, within a bounded wait)."""
    import asyncio

    import httpx

    headers = {"X-API-Key": key}

    async def read() -> tuple[int, str]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            if not streaming:
                response = await http.get(path, params=query, headers=headers)
                return response.status_code, response.text
            async with http.stream("GET", path, params=query, headers=headers) as response:
                if response.status_code != 200:
                    return response.status_code, (await response.aread()).decode()
                lines = response.aiter_lines()
                seen = [await anext(lines)]  # the `ready` frame: the stream is subscribed
                run = {"run_id": query["run_id"]} if "run_id" in query else {}
                for who, text in ((ALICE_KEY, SECRET), (BOB_KEY, BOB_MARK)):
                    called = await http.post("/tools/invoke/tool_echo", json={"text": text}, params=run,
                                             headers={"X-API-Key": who})  # fmt: skip
                    if called.status_code == 409 and who == BOB_KEY:  # alice's run, as the server knows
                        if key == BOB_KEY:
                            return -2, "\n".join(seen)  # he follows a run he may not add to
                        continue
                    assert called.status_code == 200, called.text

                async def until_sentinel() -> None:
                    async for line in lines:
                        seen.append(line)
                        if BOB_MARK in line and key == BOB_KEY or MARK in line and key != BOB_KEY:
                            return

                try:
                    await asyncio.wait_for(until_sentinel(), 30)
                except TimeoutError:
                    return -1, "\n".join(seen)  # the stream never showed what was sent after it opened
                return response.status_code, "\n".join(seen)

    return asyncio.run(read())


STREAMS = {"/tools/events", "/ui/api/stream"}


@pytest.mark.parametrize("build", [built_by_create_app, built_by_mount], ids=["create_app", "mount"])
def test_no_get_route_shows_one_principal_another_s_data(
    tmp_path: Path, build: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from echo_tools.credentials import SECRET_KEY_ENV, new_key
    from tests.echo_tools._api_support import serve_in_thread

    monkeypatch.setenv(SECRET_KEY_ENV, new_key())

    app, history = build(tmp_path)
    routes = get_routes(app)
    unknown = sorted({p for _, params, _ in routes for p in params} - {*PATH_VALUES, "run_id", "approval_id"})
    assert not unknown, f"GET routes with path parameters this test has no value for: {unknown}"
    leaks, admin_sees = [], set()
    with serve_in_thread(app) as url:
        ids = alice_creates_her_data(url, history)
        values = {**PATH_VALUES, **ids}
        for path, params, queries in routes:
            for filled in _fillings(path, params, values):
                base = {q: v for q, v in QUERY_VALUES.items() if q in queries}
                variants = [base] + [{**base, "run_id": r} for r in ids["run_id"] if "run_id" in queries]
                for query in variants:
                    streaming = path in STREAMS
                    status, text = read_as(url, filled, query, BOB_KEY, streaming)
                    if status == -1:
                        leaks.append(f"GET {filled} {query}: bob's stream never showed his own call")
                    if status == -2:
                        leaks.append(f"GET {filled} {query}: bob follows the events of alice's run")
                    # a refusal may repeat the id bob asked for, never what it holds; an answer naming alice's
                    # run id bob asked for may hold only his own calls in it (alice's inputs hold SECRET)
                    named = "run_id" in query or any(v in filled for v in ids["approval_id"] + ids["run_id"])
                    private = [SECRET] + ([MARK, *ids["approval_id"]] if status < 400 and not named else [])
                    if any(p in text for p in private):
                        leaks.append(f"GET {filled} {query} -> {status}: {text[:200]}")
                    status, text = read_as(url, filled, query, OPERATOR_KEY, streaming)
                    if status == -1:
                        leaks.append(f"GET {filled} {query}: the admin's stream never showed alice's call")
                    if status < 400 and MARK in text:
                        admin_sees.add(path)
    assert not leaks, "routes that showed bob alice's data:\n" + "\n".join(leaks)
    # the data was there to leak: the admin reads it through each kind of read
    assert {"/tools/events/history", "/tools/events", "/tools/approvals", "/tools/approvals/{approval_id}",
            "/tools/credentials", "/ui/api/runs", "/ui/api/runs/{run_id}", "/ui/api/stream",
            "/workflows/runs/{run_id}"} <= admin_sees, sorted(admin_sees)  # fmt: skip


def _fillings(path: str, params: list[str], values: dict[str, list[str]]) -> Iterator[str]:
    """`path` with each combination of values for its parameters."""
    if not params:
        yield path
        return
    first, rest = params[0], params[1:]
    for value in values[first]:
        yield from _fillings(path.replace("{" + first + "}", value), rest, values)


# -- a keyless server: no state-changing route takes a body a web page can send cross-site ---------------

WRITE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


def write_routes(app: FastAPI) -> list[tuple[str, str]]:
    """`(method, path)` of every state-changing route of `app`, path parameters filled with `x`."""
    import re

    found = set()
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, APIRoute):
            for method in (route.methods or set()) & WRITE_METHODS:
                found.add((method, re.sub(r"\{[^}]+\}", "x", route.path)))
    return sorted(found)


def keyless_apps(tmp_path: Path) -> list[tuple[str, FastAPI, Any]]:
    from tests.echo_tools._api_support import MODULE
    from workflow_bridge import echoai

    registry = make_registry(tmp_path / "tools", ECHO)
    executor = ToolExecutor(registry)
    host = FastAPI()
    layer = echoai.layer_for(tmp_path / "mounted", allowed_modules=("AgentTools", MODULE))
    layer.registry.register(ECHO)
    echoai.mount(host, storage_dir=tmp_path / "mounted", settings=ApiSettings(require_api_key=False))
    return [
        ("create_app", create_app(registry, executor, ApiSettings()), executor),
        ("mount", host, layer.executor),
    ]


async def test_no_state_changing_route_of_a_keyless_server_takes_a_body_that_is_not_json(
    tmp_path: Path,
) -> None:
    import httpx

    from echo_tools import MemoryEventLog

    for label, app, executor in keyless_apps(tmp_path):
        log = MemoryEventLog()
        executor.add_sink(log)
        routes = write_routes(app)
        assert ("POST", "/tools/invoke/x") in routes and ("POST", "/workflows/run") in routes, label
        accepted = []
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1"
        ) as http:
            for method, path in routes:
                for content_type in (
                    "text/plain",
                    "application/x-www-form-urlencoded",
                    "multipart/form-data",
                ):
                    response = await http.request(
                        method, path, content='{"text": "x"}', headers={"Content-Type": content_type}
                    )
                    if response.status_code != 415 or response.json()["field"] != "headers.content-type":
                        accepted.append(
                            f"{label}: {method} {path} ({content_type}) -> {response.status_code}"
                        )
        assert not accepted, "state-changing routes that took a body a web page can send:\n" + "\n".join(
            accepted
        )
        assert log.of_type("tool.invoked") == [], label


BODILESS = {"/tools/discover", "/tools/cache/clear", "/tools/credentials/x"}  # they read no body (DELETE x)


async def test_every_state_changing_route_answers_a_deep_or_huge_body_with_a_4xx(tmp_path: Path) -> None:
    import httpx

    deep = '{"text": ' + "[" * 5_000 + "]" * 5_000 + "}"
    almost = '{"text": ' + "[" * 900 + "]" * 900 + "}"
    huge = '{"text": "' + "x" * (2 * 1024 * 1024) + '"}'
    for label, app, _executor in keyless_apps(tmp_path):
        wrong = []
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            for method, path in write_routes(app):
                for name, body in (("deep", deep), ("almost", almost), ("huge", huge)):
                    response = await http.request(
                        method, path, content=body, headers={"Content-Type": "application/json"}
                    )
                    reads_body = path not in BODILESS
                    if response.status_code >= 500 or (
                        reads_body and name != "almost" and response.status_code < 400
                    ):
                        wrong.append(
                            f"{label}: {method} {path} ({name}) -> {response.status_code} {response.text[:120]}"
                        )
        assert not wrong, "\n".join(wrong)
