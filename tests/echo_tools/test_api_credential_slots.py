"""Issue 35: credential slots another principal holds. `POST /tools/credentials/{name}/connect/finish`
overwrote an existing per-user credential with no owner check (the attacker became its owner and the user's
next call sent the attacker's token); and while an operator's tool named a credential that existed only per
user, a key with `credentials` created the shared one, which every call for a user without their own then
sent. Both need the owner or an admin now (409 `owned` naming the owner), and nothing stored changes.
Against a real OAuth-speaking server on 127.0.0.1 (tests/echo_tools/_mcp_auth_support.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient

from echo_tools import ApiSettings, EgressPolicy, ToolExecutor, ToolRegistry, create_app
from echo_tools.credentials import SECRET_KEY_ENV
from echo_tools.gate import hash_key, principals_from
from tests.echo_tools._mcp_auth_support import AuthServer, auth_server
from tests.echo_tools.test_governance_connect import authorize

server = auth_server("oauth")
OPERATOR = {"X-API-Key": "operator-key-0123456789"}
ALICE = {"X-API-Key": "alice-key-0123456789"}
MALLORY = {"X-API-Key": "mallory-key-0123456789"}
REDIRECT = "http://127.0.0.1:9/callback"


def app_client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[TestClient, ToolRegistry]:
    monkeypatch.setenv(SECRET_KEY_ENV, Fernet.generate_key().decode())
    entries = [
        {"name": who, "key_sha256": hash_key(key["X-API-Key"]), "actions": ["credentials", "invoke"],
         "act_for_users": True}
        for who, key in (("alice", ALICE), ("mallory", MALLORY))
    ]  # fmt: skip
    registry = ToolRegistry(tmp_path / "home", egress=EgressPolicy.local())
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    settings = ApiSettings(api_key=OPERATOR["X-API-Key"], principals=principals_from({"principals": entries}))
    return TestClient(create_app(registry, executor, settings), base_url="http://127.0.0.1"), registry


def connect(client: TestClient, server: AuthServer, who: dict[str, str], user: str = "ann") -> Any:
    body = {"user_id": user, "server_url": server.url, "redirect_uri": REDIRECT}
    return client.post("/tools/credentials/crm/connect", json=body, headers=who)


def finish(client: TestClient, who: dict[str, str], code: str, state: str) -> Any:
    return client.post(
        "/tools/credentials/crm/connect/finish", json={"state": state, "code": code}, headers=who
    )


def connected(client: TestClient, server: AuthServer, who: dict[str, str], user: str = "ann") -> None:
    started = connect(client, server, who, user)
    assert started.status_code == 200, started.text
    done = finish(client, who, *authorize(started.json()["authorization_url"]))
    assert done.status_code == 200, done.text


def test_finishing_a_connect_over_another_principal_s_user_credential_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer
) -> None:
    client, registry = app_client(tmp_path, monkeypatch)
    connected(client, server, ALICE)
    store = registry.credentials
    assert store.owner_of("crm@ann") == "alice"
    refused = connect(client, server, MALLORY)  # refused before the user is sent anywhere
    assert refused.status_code == 409 and refused.json()["error_type"] == "owned", refused.text
    assert "'alice'" in refused.json()["message"] and "'mallory'" in refused.json()["message"]
    # a connect started before alice's existed is checked again when it finishes
    store.remove("crm", user_id="ann")
    started = connect(client, server, MALLORY)
    assert started.status_code == 200, started.text
    code, state = authorize(started.json()["authorization_url"])
    connected(client, server, ALICE)
    grants = server.stats()["code_grants"]
    late = finish(client, MALLORY, code, state)
    assert late.status_code == 409 and late.json()["error_type"] == "owned", late.text
    assert store.owner_of("crm@ann") == "alice"
    assert server.stats()["code_grants"] == grants  # the code was never exchanged


def test_a_connect_is_finished_only_by_the_principal_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer
) -> None:
    client, registry = app_client(tmp_path, monkeypatch)
    started = connect(client, server, ALICE, "bea")
    code, state = authorize(started.json()["authorization_url"])
    stolen = finish(client, MALLORY, code, state)
    assert stolen.status_code == 409 and "'alice'" in stolen.json()["message"], stolen.text
    assert "crm@bea" not in registry.credentials
    assert finish(client, ALICE, code, state).status_code == 200
    assert registry.credentials.owner_of("crm@bea") == "alice"


def test_an_admin_may_finish_over_any_user_credential(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer
) -> None:
    client, registry = app_client(tmp_path, monkeypatch)
    connected(client, server, ALICE)
    connected(client, server, OPERATOR)
    assert registry.credentials.owner_of("crm@ann") == "operator"


def test_a_shared_credential_an_operator_s_tool_names_needs_its_owner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: AuthServer
) -> None:
    client, registry = app_client(tmp_path, monkeypatch)
    registry.register(
        {"name": "whoami", "tool_type": "api",
         "execution_config": {"url": "http://127.0.0.1:9/me", "method": "GET", "credential": "crm"}}
    )  # fmt: skip
    connected(client, server, ALICE)  # "crm" exists only as ann's own
    body = {"name": "crm", "credential": {"type": "bearer", "token": "mallory-token"}}
    refused = client.post("/tools/credentials", json=body, headers=MALLORY)
    assert refused.status_code == 409 and refused.json()["error_type"] == "owned", refused.text
    assert "'whoami'" in refused.json()["message"] or "tool_whoami" in refused.json()["message"]
    assert "'operator'" in refused.json()["message"] and "'mallory'" in refused.json()["message"]
    assert "crm" not in registry.credentials  # no shared one: a call for another user finds none
    other = client.post("/tools/credentials", json={**body, "name": "mallorys"}, headers=MALLORY)
    assert other.status_code == 200  # a name no tool of another names is free
    own = client.post("/tools/credentials", json=body, headers=OPERATOR)
    assert own.status_code == 200 and "crm" in registry.credentials
