"""`workflow_bridge.echoai`: install into a plain DI container, mount into a host FastAPI app (served on any
host: the key decides), the error contract for unknown paths and wrong methods under the mounted prefixes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient

from echo_tools import ToolConfigError, builtin_tools_dir
from tests.echo_tools._storage_support import child_env
from workflow_bridge import echoai

KEY = "a-key-for-the-gateway"
SHIPPED = {"tool_calculator", "tool_code_executor", "tool_http_request", "tool_web_search"}
CONTRACT = {"error_type", "message", "tool_id", "field"}


class Container:
    """EchoAI's `echolib.di.Container`: providers by name, each call of `resolve` calls the provider."""

    def __init__(self) -> None:
        self.providers: dict[str, Callable[[], Any]] = {}

    def register(self, key: str, provider: Callable[[], Any]) -> None:
        self.providers[key] = provider

    def resolve(self, key: str) -> Any:
        return self.providers[key]()


def _gateway() -> FastAPI:
    """A host app with a route of its own under /workflows and a 404 it raises itself."""
    app = FastAPI()

    @app.get("/workflows/{workflow_id}")
    async def get_workflow(workflow_id: str) -> dict[str, str]:
        if workflow_id == "missing":
            raise HTTPException(404, detail="Workflow not found")
        return {"workflow_id": workflow_id}

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    return app


def test_install_registers_the_four_names_with_the_shipped_tools_discovered(tmp_path: Path) -> None:
    container = Container()
    layer = echoai.install(container, storage_dir=tmp_path / "tools")
    assert set(container.providers) == {"tool.registry", "tool.executor", "tool.plugin", "workflow.compiler"}
    registry = container.resolve("tool.registry")
    assert registry is container.resolve("tool.registry") is layer.registry  # one shared object
    assert SHIPPED <= {t.tool_id for t in registry.list_all()}
    assert registry.discovery_dirs[0] == builtin_tools_dir()
    executor = container.resolve("tool.executor")
    assert executor.invoke_sync("Calculator", {"operation": "add", "values": [2, 3]}).output["result"] == 5
    assert container.resolve("tool.plugin").registry is registry
    compiler = container.resolve("workflow.compiler")
    assert compiler.registry is registry and compiler.executor is executor
    assert compiler.compile_to_langgraph == compiler.compile  # the name EchoAI's runtime calls


def test_install_and_mount_on_one_storage_folder_share_one_registry(tmp_path: Path) -> None:
    container = Container()
    layer = echoai.install(container, storage_dir=tmp_path / "tools")
    assert echoai.mount(_gateway(), storage_dir=tmp_path / "tools", api_key=KEY) is layer


def test_with_a_key_every_mounted_route_needs_it_on_a_non_loopback_host(tmp_path: Path) -> None:
    app = _gateway()
    echoai.mount(app, storage_dir=tmp_path / "tools", api_key=KEY)
    client = TestClient(app, base_url="http://echoai.example.com")
    for method, path in [
        ("GET", "/tools/list"),
        ("GET", "/tools/tool_calculator"),
        ("POST", "/tools/invoke/Calculator"),
        ("POST", "/tools/discover"),
        ("GET", "/tools/metrics"),
        ("POST", "/workflows/compile"),
    ]:
        refused = client.request(method, path, json={})
        assert refused.status_code == 401, (method, path, refused.text)
        assert refused.json()["error_type"] == "unauthorized"
    with_key = {"X-API-Key": KEY}
    listed = client.get("/tools/list", headers=with_key)
    assert listed.status_code == 200 and SHIPPED <= {t["tool_id"] for t in listed.json()}
    invoked = client.post(
        "/tools/invoke/Calculator", json={"operation": "add", "values": [2, 3]}, headers=with_key
    )
    assert invoked.status_code == 200 and invoked.json()["output"]["result"] == 5
    wrong = client.get("/tools/list", headers={"X-API-Key": "not-the-key-at-all"})
    assert wrong.status_code == 401 and wrong.json()["message"] == "The API key is wrong"


def test_without_a_key_only_loopback_host_names_are_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ECHO_TOOLS_API_KEY", raising=False)
    app = _gateway()
    echoai.mount(app, storage_dir=tmp_path / "tools")
    remote = TestClient(app, base_url="http://echoai.example.com").get("/tools/list")
    assert remote.status_code == 421 and remote.json()["field"] == "headers.host"
    local = TestClient(app, base_url="http://127.0.0.1:8000").get("/tools/list")
    assert local.status_code == 200


def test_the_key_is_read_from_the_environment_when_not_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ECHO_TOOLS_API_KEY", KEY)
    app = _gateway()
    echoai.mount(app, storage_dir=tmp_path / "tools")
    client = TestClient(app, base_url="http://0.0.0.0:8000")
    assert client.get("/tools/list").status_code == 401
    assert client.get("/tools/list", headers={"Authorization": f"Bearer {KEY}"}).status_code == 200


def test_a_short_key_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ToolConfigError) as caught:
        echoai.mount(_gateway(), storage_dir=tmp_path / "tools", api_key="short")
    assert caught.value.field == "api_key"


def test_unknown_paths_and_wrong_methods_answer_the_contract(tmp_path: Path) -> None:
    app = _gateway()
    echoai.mount(app, storage_dir=tmp_path / "tools", api_key=KEY)
    client = TestClient(app, base_url="http://echoai.example.com", headers={"X-API-Key": KEY})

    unknown = client.get("/tools/no/such/route")
    assert unknown.status_code == 404
    assert set(unknown.json()) >= CONTRACT and unknown.json()["error_type"] == "not_found"
    assert "/tools/no/such/route" in unknown.json()["message"]

    discover = client.get("/tools/discover")  # was 404 "No tool matches 'discover'"
    assert discover.status_code == 405
    assert discover.json()["error_type"] == "method_not_allowed" and discover.json()["field"] == "method"
    assert discover.headers["allow"] == "POST" and "POST" in discover.json()["message"]

    routed = client.get("/tools/invoke/Calculator")  # a POST route: routing's own 405
    assert routed.status_code == 405 and set(routed.json()) >= CONTRACT
    assert "POST" in routed.headers["allow"]

    wrong_run = client.get("/workflows/run/now")
    assert wrong_run.status_code == 404 and wrong_run.json()["error_type"] == "not_found"
    deleted = client.delete("/tools/register")
    assert deleted.status_code == 405 and deleted.json()["error_type"] == "method_not_allowed"


def test_the_hosts_own_answers_are_left_as_they_are(tmp_path: Path) -> None:
    app = _gateway()
    echoai.mount(app, storage_dir=tmp_path / "tools", api_key=KEY)
    client = TestClient(app)
    assert client.get("/workflows/wf_1").json() == {"workflow_id": "wf_1"}  # the host's route, no key
    own = client.get("/workflows/missing")
    assert own.status_code == 404 and own.json() == {"detail": "Workflow not found"}
    elsewhere = client.get("/nowhere")
    assert elsewhere.status_code == 404 and elsewhere.json() == {"detail": "Not Found"}
    assert client.get("/healthz").json() == {"status": "ok"}


def test_in_a_host_folder_with_its_own_agenttools_the_shipped_tools_run_without_renaming_it(
    tmp_path: Path,
) -> None:
    host = tmp_path / "echoAI"
    (host / "AgentTools" / "calculator").mkdir(parents=True)
    (host / "AgentTools" / "__init__.py").write_text("")
    (host / "AgentTools" / "calculator" / "__init__.py").write_text("")
    (host / "AgentTools" / "calculator" / "service.py").write_text(
        "class CalculatorService:\n    def calculate(self, data): return 'host'\n"
    )
    code = (
        "import json, sys\n"
        "from workflow_bridge import echoai\n"
        "class Container:\n"
        "    def __init__(self): self.p = {}\n"
        "    def register(self, k, f): self.p[k] = f\n"
        "c = Container()\n"
        "echoai.install(c, storage_dir='apps/storage/tools')\n"
        "x = c.p['tool.executor']()\n"
        "out = x.invoke_sync('Calculator', {'operation': 'add', 'values': [2, 3]}).output\n"
        "print(json.dumps([sys.modules['AgentTools'].__file__, out]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=host, env=child_env(), capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    where, out = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(where).parent == builtin_tools_dir() and out["result"] == 5
    assert (host / "AgentTools" / "calculator" / "service.py").is_file()  # the host's package stays


def test_from_another_folder_the_mounted_gateway_serves_the_shipped_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # in this process, its current folder a fresh one (the test above needs a process of its own: the
    # host's AgentTools on sys.path)
    monkeypatch.chdir(tmp_path)
    app = FastAPI()
    echoai.mount(app, storage_dir="store", api_key=KEY)
    client = TestClient(app, base_url="http://0.0.0.0:8000")
    called = client.post(
        "/tools/invoke/Calculator", json={"operation": "add", "values": [2, 3]}, headers={"X-API-Key": KEY}
    )
    assert [called.status_code, called.json()["output"]["result"]] == [200, 5]
    assert (tmp_path / "store").is_dir()  # the storage folder, relative to the folder it runs from
