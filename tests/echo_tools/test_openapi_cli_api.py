"""`echo-tools import openapi` and `echo-tools credentials ...` (in-process through `echo_tools.cli.main`,
plus the group's subprocess smoke test: an import in a real process), and the HTTP routes' error
contract."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry
from echo_tools.credentials import SECRET_KEY_ENV, STORE_FILE, new_key
from tests.echo_tools._thirdparty_support import BEARER, ShopService, shop_spec

from ._cli_support import CliResult, InProcessCli, cli


@pytest.fixture
def shop() -> Iterator[ShopService]:
    service = ShopService().start()
    yield service
    service.stop()


class Commands:
    """`echo-tools --storage STORAGE ARGS` in this process, with ECHO_TOOLS_SECRET_KEY set to `key` for
    the one command, or unset."""

    def __init__(self, run_cli: InProcessCli) -> None:
        self.run_cli = run_cli

    def __call__(self, storage: Path, *args: str, key: str | None = None, stdin: str = "") -> CliResult:
        return self.run_cli(storage, "--storage", str(storage), *args, env={SECRET_KEY_ENV: key}, stdin=stdin)


@pytest.fixture
def echo(run_cli: InProcessCli) -> Commands:
    return Commands(run_cli)


@pytest.mark.slow  # one `echo-tools import openapi` process
def test_import_set_a_credential_show_and_invoke_from_the_command_line(
    tmp_path: Path, shop: ShopService, echo: Commands
) -> None:
    storage = tmp_path / "tools"
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(shop_spec(shop.base)), encoding="utf-8")
    made = echo(storage, "credentials", "new-key")
    key = made.stdout.strip()
    assert made.returncode == 0 and len(key) == 44 and SECRET_KEY_ENV in made.stderr

    # the group's subprocess smoke test: exit code and both streams of the real process
    imported = cli(
        storage,
        *("--storage", str(storage), "import", "openapi", str(spec), "--provider", "shop"),
        *("--credential", "shop"),
        env={SECRET_KEY_ENV: key},
    )
    assert imported.returncode == 0, imported.stderr
    assert "Imported 6 tools" in imported.stdout and "shop_get_item  GET /items/{item_id}" in imported.stdout
    # not stored yet: a warning (logging's, which a process prints on stderr), not a refusal
    assert "credential 'shop'" in imported.stderr

    refused = echo(storage, "credentials", "set", "shop", "--type", "bearer", stdin=BEARER + "\n")
    assert refused.returncode == 1 and "echo-tools credentials new-key" in refused.stderr
    stored = echo(storage, "credentials", "set", "shop", "--type", "bearer", key=key, stdin=BEARER + "\n")
    assert stored.returncode == 0 and "Credential 'shop' (bearer) created" in stored.stdout
    assert BEARER.encode() not in (storage / STORE_FILE).read_bytes()
    listed = echo(storage, "credentials", "list")
    assert listed.stdout == "shop\tbearer\n"

    shown = json.loads(echo(storage, "show", "shop_get_item").stdout)
    assert shown["metadata"]["provider"] == "shop" and shown["metadata"]["operation"] == "get_item"
    assert shown["metadata"]["credential"] == "shop"

    called = echo(storage, "invoke", "shop_get_item", "--input", '{"item_id": 5}', key=key)
    assert called.returncode == 0, called.stderr
    assert json.loads(called.stdout)["output"]["id"] == 5
    assert BEARER not in called.stdout + called.stderr + stored.stdout + stored.stderr

    removed = echo(storage, "credentials", "remove", "shop")
    assert removed.returncode == 0 and echo(storage, "credentials", "list").stdout == ""
    again = echo(storage, "credentials", "remove", "shop")
    assert again.returncode == 1 and "'shop'" in again.stderr


def test_fields_and_hosts_from_the_command_line(tmp_path: Path, echo: Commands) -> None:
    key = new_key()
    args = [
        "--type",
        "api_key",
        "--field",
        "in=header",
        "--field",
        "name=X-API-Key",
        "--field",
        "hosts=a.com,b.com",
    ]
    result = echo(tmp_path, "credentials", "set", "maps", *args, key=key, stdin="v-1\n")
    assert result.returncode == 0, result.stderr
    from echo_tools.credentials import CredentialStore

    assert CredentialStore(tmp_path).hosts_of("maps") == ["a.com", "b.com"]


def test_a_secret_on_the_command_line_is_refused(tmp_path: Path, echo: Commands) -> None:
    result = echo(
        tmp_path, "credentials", "set", "x", "--type", "bearer", "--field", "token=abc", key=new_key()
    )
    assert result.returncode == 1 and "shell history" in result.stderr


def test_a_credential_from_a_json_file(tmp_path: Path, echo: Commands) -> None:
    source = tmp_path / "cred.json"
    source.write_text(
        json.dumps({"type": "api_key", "in": "query", "name": "key", "value": "v-1"}), encoding="utf-8"
    )
    key = new_key()
    result = echo(tmp_path / "s", "credentials", "set", "maps", "--from", str(source), key=key)
    assert result.returncode == 0 and "(api_key) created" in result.stdout


# -- routes ------------------------------------------------------------------------------------------------


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[httpx.Client, ToolRegistry]]:
    from fastapi.testclient import TestClient

    from echo_tools.api import create_app
    from echo_tools.settings import ApiSettings

    registry = ToolRegistry(storage_dir=tmp_path)
    executor = ToolExecutor(registry, egress=EgressPolicy())
    with TestClient(create_app(registry, executor, ApiSettings()), base_url="http://127.0.0.1") as client:
        yield client, registry
    executor.close()


def test_routes_set_list_and_remove_credentials_showing_names_and_types_only(
    api: tuple[httpx.Client, ToolRegistry], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, _ = api
    body: dict[str, Any] = {"name": "shop", "credential": {"type": "bearer", "token": BEARER}}
    refused = client.post("/tools/credentials", json=body)
    assert refused.status_code == 422 and refused.json()["field"] == SECRET_KEY_ENV
    assert "new-key" in refused.json()["message"]
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    assert client.post("/tools/credentials", json=body).json() == {
        "name": "shop",
        "type": "bearer",
        "status": "created",
    }
    assert client.get("/tools/credentials").json() == [{"name": "shop", "type": "bearer"}]
    bad = client.post("/tools/credentials", json={"name": "x", "credential": {"type": "bearer"}})
    assert bad.status_code == 422 and bad.json()["field"] == "token"
    assert client.delete("/tools/credentials/shop").json() == {"name": "shop", "status": "removed"}
    missing = client.delete("/tools/credentials/shop")
    assert missing.status_code == 404 and missing.json()["error_type"] == "not_found"


def test_import_route_errors_follow_the_contract(api: tuple[httpx.Client, ToolRegistry]) -> None:
    client, registry = api
    broken = client.post(
        "/tools/import/openapi", json={"spec": {"openapi": "3.0.0", "paths": 3}, "provider": "x"}
    )
    assert broken.status_code == 422 and broken.json()["field"] == "/servers"
    path = client.post("/tools/import/openapi", json={"spec": "/etc/passwd", "provider": "x"})
    assert path.status_code == 422 and path.json()["field"] == "spec"
    local = client.post(
        "/tools/import/openapi", json={"spec": shop_spec("http://127.0.0.1:9"), "provider": "x"}
    )
    assert local.status_code == 403 and local.json()["field"] == "base_url"
    fetched = client.post(
        "/tools/import/openapi", json={"spec": "http://127.0.0.1:9/openapi.json", "provider": "x"}
    )
    assert fetched.status_code == 422 and "loopback" in fetched.json()["message"]
    ok = client.post(
        "/tools/import/openapi",
        json={"spec": shop_spec("https://shop.example.com"), "provider": "shop", "operations": ["getItem"]},
    )
    assert ok.status_code == 200, ok.text
    assert [t["tool_id"] for t in ok.json()["tools"]] == ["shop_get_item"]
    assert registry.require("shop_get_item").source.value == "openapi"


def test_a_remote_caller_cannot_send_a_stored_credential_to_a_host_of_its_choosing(
    api: tuple[httpx.Client, ToolRegistry], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the attack: import a spec whose server is the attacker's, naming the operator's credential
    client, registry = api
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    registry.credentials.set("github", {"type": "bearer", "token": BEARER})
    evil = {"spec": shop_spec("https://evil.example.com"), "provider": "evil", "credential": "github"}
    refused = client.post("/tools/import/openapi", json=evil)
    assert refused.status_code == 403 and refused.json()["field"] == "credential"
    assert "'evil.example.com'" in refused.json()["message"] and "hosts" in refused.json()["message"]
    assert registry.list_by_tags(["provider:evil"]) == []
    registry.credentials.set("github", {"type": "bearer", "token": BEARER, "hosts": ["api.github.com"]})
    assert client.post("/tools/import/openapi", json=evil).status_code == 403
    fine = {**evil, "spec": shop_spec("https://api.github.com"), "provider": "gh"}
    assert client.post("/tools/import/openapi", json=fine).status_code == 200
    listed = client.get("/tools/credentials").json()
    assert listed == [{"name": "github", "type": "bearer"}]
