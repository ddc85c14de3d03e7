"""Per-user credentials: `credentials.set(name, secret, user_id=...)`; a call resolves its user's credential
first, then the shared one; another user's credential never reaches a call (not found, never the secret).
A real HTTP service on 127.0.0.1 sees each user's token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from echo_tools import EgressPolicy, ToolContext, ToolExecutor, ToolRegistry
from echo_tools.credentials import CredentialError

from ._cli_support import InProcessCli
from ._executor_support import ThreadedAiohttpServer


class RecordingServer(ThreadedAiohttpServer):
    """A loopback service that keeps the Authorization header of every request it received (a credential
    echoed back in a result is hidden by value, so what the service saw is read here)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str | None] = []

    async def make_app(self) -> Any:
        from aiohttp import web

        async def echo(request: web.Request) -> web.Response:
            self.seen.append(request.headers.get("Authorization"))
            return web.json_response({"ok": True})

        app = web.Application()
        app.router.add_route("*", "/echo", echo)
        return app


@pytest.fixture(scope="module")
def service() -> Iterator[RecordingServer]:
    server = RecordingServer().start()
    yield server
    server.stop()


@pytest.fixture
def executor(service: RecordingServer, key: str) -> Iterator[ToolExecutor]:
    registry = ToolRegistry(egress=EgressPolicy.local())
    registry.register(
        {
            "name": "Whoami",
            "tool_type": "api",
            "execution_config": {"url": f"{service.base}/echo", "method": "GET", "credential": "svc"},
        }
    )
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    yield executor
    executor.close()


def seen_token(service: RecordingServer, result: object) -> str | None:
    """The Authorization header the service received for the call that gave `result`."""
    assert result.success, result.error  # type: ignore[attr-defined]
    assert service.seen
    return service.seen[-1]


def test_each_user_calls_the_same_tool_with_their_own_token(
    executor: ToolExecutor, service: RecordingServer
) -> None:
    store = executor.registry.credentials
    store.set("svc", {"type": "bearer", "token": "alice-token-1"}, user_id="alice")
    store.set("svc", {"type": "bearer", "token": "bob-token-2"}, user_id="bob")
    alice = executor.invoke_sync("Whoami", {}, ToolContext(user_id="alice"))
    assert seen_token(service, alice) == "Bearer alice-token-1"
    bob = executor.invoke_sync("Whoami", {}, ToolContext(user_id="bob"))
    assert seen_token(service, bob) == "Bearer bob-token-2"


def test_another_users_credential_never_reaches_a_call(executor: ToolExecutor) -> None:
    store = executor.registry.credentials
    store.set("svc", {"type": "bearer", "token": "alice-token-1"}, user_id="alice")
    for context in (ToolContext(user_id="mallory"), ToolContext()):
        refused = executor.invoke_sync("Whoami", {}, context)
        assert refused.success is False and "'svc' does not exist" in (refused.error or "")
        assert "alice-token-1" not in refused.model_dump_json()


def test_a_user_without_their_own_credential_gets_the_shared_one(
    executor: ToolExecutor, service: RecordingServer
) -> None:
    store = executor.registry.credentials
    store.set("svc", {"type": "bearer", "token": "team-token"})
    store.set("svc", {"type": "bearer", "token": "alice-token-1"}, user_id="alice")
    assert (
        seen_token(service, executor.invoke_sync("Whoami", {}, ToolContext(user_id="carol")))
        == "Bearer team-token"
    )
    assert (
        seen_token(service, executor.invoke_sync("Whoami", {}, ToolContext(user_id="alice")))
        == "Bearer alice-token-1"
    )
    assert seen_token(service, executor.invoke_sync("Whoami", {})) == "Bearer team-token"


def test_per_user_credentials_are_listed_with_their_user_and_removed_alone(executor: ToolExecutor) -> None:
    store = executor.registry.credentials
    store.set("svc", {"type": "bearer", "token": "team-token"})
    store.set("svc", {"type": "bearer", "token": "alice-token-1"}, user_id="alice")
    assert store.list() == [
        {"name": "svc", "type": "bearer"},
        {"name": "svc", "type": "bearer", "user_id": "alice"},
    ]
    assert store.remove("svc", user_id="alice") is True
    assert store.list() == [{"name": "svc", "type": "bearer"}]


def test_a_bad_user_id_is_refused_naming_the_field(executor: ToolExecutor) -> None:
    with pytest.raises(CredentialError) as caught:
        executor.registry.credentials.set("svc", {"type": "bearer", "token": "t"}, user_id="bad\nuser")
    assert caught.value.field == "user_id"


def test_the_cli_sets_lists_and_removes_a_users_own_credential(
    run_cli: InProcessCli, key: str, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    made = run_cli(
        home,
        "credentials",
        "set",
        "svc",
        "--user",
        "alice",
        "--from",
        "-",
        stdin='{"type": "bearer", "token": "tok-a"}',
    )
    assert made.returncode == 0, made.stderr
    assert "Credential 'svc' of user 'alice' (bearer) created" in made.stdout
    listed = run_cli(home, "credentials", "list")
    assert "svc\tbearer\tuser alice" in listed.stdout and "tok-a" not in listed.stdout
    assert run_cli(home, "credentials", "remove", "svc").returncode == 1  # no shared one
    assert run_cli(home, "credentials", "remove", "svc", "--user", "alice").returncode == 0
    assert "svc" not in run_cli(home, "credentials", "list").stdout
