"""CredentialStore: encrypted at rest, names and types only on the way out, applied at call time by the `api`
backend against a real service on 127.0.0.1 (bearer, api key in header and query, basic, OAuth2)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools import EgressPolicy, JsonlEventLog, MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.credentials import SECRET_KEY_ENV, STORE_FILE, CredentialError, CredentialStore, new_key
from echo_tools.openapi import import_openapi
from tests.echo_tools._thirdparty_support import (
    BEARER,
    CLIENT_SECRET,
    CREDENTIALS,
    SECRETS,
    ShopService,
    oauth_credential,
    shop_spec,
)


@pytest.fixture
def shop() -> Iterator[ShopService]:
    service = ShopService().start()
    yield service
    service.stop()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def open_registry(folder: Path) -> ToolRegistry:
    return ToolRegistry(storage_dir=folder, egress=EgressPolicy.local())


# -- the store ---------------------------------------------------------------------------------------


def test_set_list_remove_round_trip_and_the_file_holds_no_secret(tmp_path: Path, key: str) -> None:
    store = CredentialStore(tmp_path)
    assert store.set("shop-bearer", CREDENTIALS["shop-bearer"]) == {
        "name": "shop-bearer",
        "type": "bearer",
        "status": "created",
    }
    store.set("shop-basic", CREDENTIALS["shop-basic"])
    assert store.set("shop-bearer", {"type": "bearer", "token": BEARER + "x"})["status"] == "updated"
    again = CredentialStore(tmp_path)  # another process's view of the same folder
    assert again.list() == [
        {"name": "shop-basic", "type": "basic"},
        {"name": "shop-bearer", "type": "bearer"},
    ]
    raw = (tmp_path / STORE_FILE).read_bytes()
    assert all(secret.encode() not in raw for secret in SECRETS)
    assert (tmp_path / STORE_FILE).stat().st_mode & 0o077 == 0
    assert again.remove("shop-basic") is True and again.remove("shop-basic") is False
    assert [c["name"] for c in store.list()] == ["shop-bearer"]
    assert BEARER not in repr(store) and "shop-bearer" in repr(store)


def test_storing_without_a_key_is_refused_saying_how_to_make_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    with pytest.raises(CredentialError) as info:
        CredentialStore(tmp_path).set("shop-bearer", CREDENTIALS["shop-bearer"])
    assert "echo-tools credentials new-key" in info.value.message
    assert info.value.field == SECRET_KEY_ENV
    assert not (tmp_path / STORE_FILE).exists()


def test_a_malformed_key_is_named_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, "not-a-fernet-key")
    with pytest.raises(CredentialError, match="is not a valid Fernet key") as info:
        CredentialStore(tmp_path).set("shop-bearer", CREDENTIALS["shop-bearer"])
    assert "not-a-fernet-key" not in info.value.message


async def test_a_wrong_key_is_a_clear_error_and_nothing_is_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    CredentialStore(tmp_path).set("shop-bearer", CREDENTIALS["shop-bearer"])
    before = (tmp_path / STORE_FILE).read_bytes()
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    store = CredentialStore(tmp_path)
    with pytest.raises(CredentialError, match="written with another key") as info:
        store.set("shop-basic", CREDENTIALS["shop-basic"])
    assert info.value.field == SECRET_KEY_ENV and "'shop-bearer'" in info.value.message
    with pytest.raises(CredentialError, match="written with another key"):
        await store.apply("shop-bearer", "http://127.0.0.1/")
    assert (tmp_path / STORE_FILE).read_bytes() == before
    assert store.list() == [{"name": "shop-bearer", "type": "bearer"}]  # names need no key


def test_a_damaged_store_is_reported_and_left_as_it_is(tmp_path: Path, key: str) -> None:
    (tmp_path / STORE_FILE).write_text("{not json", encoding="utf-8")
    with pytest.raises(CredentialError, match="is damaged") as info:
        CredentialStore(tmp_path).set("shop-bearer", CREDENTIALS["shop-bearer"])
    assert str(tmp_path / STORE_FILE) in info.value.message
    assert (tmp_path / STORE_FILE).read_text(encoding="utf-8") == "{not json"


@pytest.mark.parametrize(
    ("name", "credential", "field", "named"),
    [
        ("ok", {"type": "ssh"}, "type", "'ssh'"),
        ("ok", {"type": "bearer"}, "token", "'token'"),
        ("ok", {"type": "bearer", "token": BEARER, "extra": 1}, "extra", "'extra'"),
        ("ok", {"type": "api_key", "in": "cookie", "name": "k", "value": "v"}, "in", "'cookie'"),
        ("ok", {"type": "basic", "username": "u", "password": "a\nb"}, "password", "'password'"),
        ("ok", {**oauth_credential("http://x"), "token_url": "ftp://x/t"}, "token_url", "'ftp://x/t'"),
        ("ok", {**oauth_credential("http://x"), "scopes": 5}, "scopes", "5"),
        ("ok", "just-a-token", "credential", "str"),
        ("../etc", CREDENTIALS["shop-bearer"], "name", "'../etc'"),
    ],
)
def test_bad_credentials_are_refused_naming_the_field_and_value(
    tmp_path: Path, key: str, name: str, credential: object, field: str, named: str
) -> None:
    with pytest.raises(CredentialError) as info:
        CredentialStore(tmp_path).set(name, credential)  # type: ignore[arg-type]
    assert info.value.field == field
    assert named in info.value.message


def test_a_missing_secret_field_is_named_without_showing_a_value(tmp_path: Path, key: str) -> None:
    with pytest.raises(CredentialError) as info:
        CredentialStore(tmp_path).set("x", {"type": "basic", "username": "u", "password": 12345})
    assert info.value.field == "password" and "12345" not in info.value.message


def test_an_in_memory_store_needs_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SECRET_KEY_ENV, raising=False)
    store = ToolRegistry().credentials
    store.set("shop-bearer", CREDENTIALS["shop-bearer"])
    assert store.list() == [{"name": "shop-bearer", "type": "bearer"}]


# -- applied by the api backend ------------------------------------------------------------------------


def import_shop(registry: ToolRegistry, shop: ShopService, credential: str, operation: str) -> str:
    tools = import_openapi(
        registry, shop_spec(shop.base), provider="shop", credential=credential, operations=[operation]
    )
    return tools[0].tool_id


@pytest.mark.parametrize(
    ("credential", "operation", "data", "expected"),
    [
        ("shop-bearer", "getItem", {"item_id": 7}, {"id": 7}),
        ("shop-key", "createOrder", {"item_id": 7, "quantity": 2}, {"status": "created"}),
        ("shop-query", "get_search", {"q": "lamp"}, {"hits": 3}),
        ("shop-basic", "getAccount", {}, {"user": "ada"}),
    ],
)
async def test_each_credential_type_authenticates_against_the_real_service(
    tmp_path: Path, key: str, shop: ShopService, credential: str, operation: str, data: dict, expected: dict
) -> None:
    registry = open_registry(tmp_path)
    tool_id = import_shop(registry, shop, credential, operation)
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        failed = await executor.invoke(tool_id, data)
        assert not failed.success and failed.error_type == "execution"  # not stored yet
        assert f"credential {credential!r} does not exist" in (failed.error or "")
        registry.credentials.set(credential, CREDENTIALS[credential])
        result = await executor.invoke(tool_id, data)
    finally:
        await executor.aclose()
    assert result.success, result.error
    assert expected.items() <= result.output.items()


async def test_oauth2_tokens_are_fetched_once_cached_and_refreshed_after_expiry(
    tmp_path: Path, key: str, shop: ShopService
) -> None:
    registry = open_registry(tmp_path)
    clock = Clock()
    registry.credentials.clock = clock
    registry.credentials.set("shop-oauth", oauth_credential(shop.base))
    tool_id = import_shop(registry, shop, "shop-oauth", "listReports")
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        results = await asyncio.gather(*(executor.invoke(tool_id, {}) for _ in range(10)))
        assert all(r.success for r in results), [r.error for r in results]
        assert shop.token_fetches == 1  # ten concurrent calls, one token request
        clock.now += 3600 - 31  # within the refresh margin (30 s) of the 3600 s lifetime
        assert (await executor.invoke(tool_id, {})).success
        assert shop.token_fetches == 1
        clock.now += 2
        assert (await executor.invoke(tool_id, {})).success
        assert shop.token_fetches == 2
    finally:
        await executor.aclose()


async def test_oauth2_client_secret_in_the_body_works_too(
    tmp_path: Path, key: str, shop: ShopService
) -> None:
    registry = open_registry(tmp_path)
    registry.credentials.set("shop-oauth", oauth_credential(shop.base, client_auth="body"))
    tool_id = import_shop(registry, shop, "shop-oauth", "listReports")
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        assert (await executor.invoke(tool_id, {})).success
    finally:
        await executor.aclose()


async def test_a_refused_token_request_fails_the_call_naming_the_credential_not_the_secret(
    tmp_path: Path, key: str, shop: ShopService
) -> None:
    registry = open_registry(tmp_path)
    registry.credentials.set("shop-oauth", {**oauth_credential(shop.base), "client_secret": "wrong-secret"})
    tool_id = import_shop(registry, shop, "shop-oauth", "listReports")
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        result = await executor.invoke(tool_id, {})
    finally:
        await executor.aclose()
    assert not result.success
    assert "credential 'shop-oauth'" in result.error and "HTTP 401 ('invalid_client')" in result.error
    assert f"{shop.base}/oauth/token" in result.error and "wrong-secret" not in result.error


async def test_the_token_url_is_checked_against_the_egress_policy(tmp_path: Path, key: str) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)  # default policy: no loopback
    registry.credentials.set("meta", oauth_credential("http://169.254.169.254"))
    with pytest.raises(Exception, match="link-local") as info:
        await registry.credentials.apply("meta", "https://api.example.com/", egress=EgressPolicy())
    assert "169.254.169.254" in str(info.value)


def test_a_tool_naming_an_unknown_credential_registers_with_a_warning(
    tmp_path: Path, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    registry = open_registry(tmp_path)
    with caplog.at_level(logging.WARNING, logger="echo_tools.credentials"):
        registry.register(
            {
                "name": "Ping",
                "tool_type": "api",
                "execution_config": {"url": "http://127.0.0.1:9/ping", "credential": "nope"},
            }
        )
    assert any("'nope'" in r.getMessage() and "does not exist" in r.getMessage() for r in caplog.records)


def test_a_credential_reference_that_is_not_a_name_is_refused(tmp_path: Path) -> None:
    from echo_tools.errors import ToolRegistrationError

    with pytest.raises(ToolRegistrationError) as info:
        open_registry(tmp_path).register(
            {
                "name": "Ping",
                "tool_type": "api",
                "execution_config": {"url": "http://127.0.0.1:9/ping", "credential": {"token": "x"}},
            }
        )
    assert info.value.field == "execution_config.credential"


async def test_a_redirect_to_another_origin_never_receives_the_credential(
    tmp_path: Path, key: str, shop: ShopService
) -> None:
    other = ShopService().start()
    try:
        shop.redirect_to = f"{other.base}/capture"
        registry = open_registry(tmp_path)
        for name in ("shop-bearer", "shop-query"):
            registry.credentials.set(name, CREDENTIALS[name])
            tool_id = import_shop(registry, shop, name, "goAway")
            executor = ToolExecutor(registry, egress=EgressPolicy.local())
            try:
                result = await executor.invoke(tool_id, {})
            finally:
                await executor.aclose()
            assert result.success and result.output == {"captured": True}
        seen = repr(other.captured)
        assert len(other.captured) == 2
        assert all(secret not in seen for secret in SECRETS)
    finally:
        other.stop()


# -- no secret anywhere --------------------------------------------------------------------------------


async def test_no_secret_appears_in_events_results_logs_api_responses_or_store_files(
    tmp_path: Path, key: str, shop: ShopService, caplog: pytest.LogCaptureFixture
) -> None:
    import httpx

    from echo_tools.api import create_app
    from echo_tools.settings import ApiSettings

    storage = tmp_path / "tools"
    registry = open_registry(storage)
    log = MemoryEventLog()
    jsonl = tmp_path / "events.jsonl"
    executor = ToolExecutor(registry, [log, JsonlEventLog(jsonl)], egress=EgressPolicy.local())
    registry.events.add(log)
    app = create_app(registry, executor, ApiSettings())
    seen: list[str] = []
    transport = httpx.ASGITransport(app=app)
    plan = [
        ("shop-bearer", "getItem", {"item_id": 3, "fields": ["a", "b"], "X-Request-Id": "r1"}),
        ("shop-key", "createOrder", {"item_id": 3, "quantity": 1, "note": None}),
        ("shop-query", "get_search", {"q": "lamp"}),
        ("shop-basic", "getAccount", {}),
        ("shop-oauth", "listReports", {}),
    ]
    with caplog.at_level(logging.DEBUG):
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for name, operation, data in plan:
                body = {**(CREDENTIALS.get(name) or oauth_credential(shop.base)), "hosts": ["127.0.0.1"]}
                response = await client.post("/tools/credentials", json={"name": name, "credential": body})
                assert response.status_code == 200, response.text
                seen.append(response.text)
                response = await client.post(
                    "/tools/import/openapi",
                    json={
                        "spec": shop_spec(shop.base),
                        "provider": "shop",
                        "credential": name,
                        "operations": [operation],
                    },
                )
                assert response.status_code == 200, response.text
                seen.append(response.text)
                tool_id = response.json()["tools"][0]["tool_id"]
                response = await client.post(f"/tools/invoke/id/{tool_id}", json=data)
                assert response.status_code == 200, response.text
                seen.append(response.text)
                seen.append((await client.get(f"/tools/{tool_id}")).text)
            # a failing call too: its event carries the input and the error
            registry.credentials.remove("shop-basic")
            wrong = {**CREDENTIALS["shop-basic"], "password": "nope-1", "hosts": ["127.0.0.1"]}
            registry.credentials.set("shop-basic", wrong)
            response = await client.post("/tools/invoke/id/shop_get_account", json={})
            assert response.status_code == 502
            seen.append(response.text)
            seen.append((await client.get("/tools/credentials")).text)
            seen.append((await client.get("/tools/list")).text)
    await executor.aclose()
    assert shop.token_fetches == 1
    seen += [repr(e) for e in log.events] + [e.to_json() for e in log.events]
    # every record of this process, except the access log of the third-party service itself
    ours = [r for r in caplog.records if r.name != "aiohttp.access"]
    assert any(r.name == "httpx" for r in ours)  # the client's own request log is among them
    seen += [r.getMessage() for r in ours] + [repr(r.args) for r in ours]
    seen.append(jsonl.read_text(encoding="utf-8"))
    seen += [p.read_text(encoding="utf-8", errors="replace") for p in storage.iterdir() if p.is_file()]
    seen.append(repr(registry.credentials))
    text = "\n".join(seen)
    assert "shop-oauth" in text  # names are shown; secrets never
    for secret in (*SECRETS, CLIENT_SECRET):
        assert secret not in text, f"{secret!r} leaked"


async def test_a_credential_with_hosts_is_never_applied_to_another_host(tmp_path: Path, key: str) -> None:
    store = CredentialStore(tmp_path)
    store.set("gh", {"type": "bearer", "token": BEARER, "hosts": ["api.github.com"]})
    applied = await store.apply("gh", "https://api.github.com/user")
    assert applied.headers == {"Authorization": f"Bearer {BEARER}"}
    with pytest.raises(CredentialError) as info:
        await store.apply("gh", "https://evil.example.com/steal", tool_id="t")
    assert info.value.field == "execution_config.credential"
    assert "'evil.example.com'" in info.value.message and BEARER not in info.value.message
    assert store.hosts_of("gh") == ["api.github.com"] and store.list() == [{"name": "gh", "type": "bearer"}]


def test_hosts_must_be_a_list_of_host_names(tmp_path: Path, key: str) -> None:
    with pytest.raises(CredentialError) as info:
        CredentialStore(tmp_path).set("gh", {"type": "bearer", "token": BEARER, "hosts": "https://x/"})
    assert info.value.field == "hosts" and "'https://x/'" in info.value.message


def test_a_remotely_registered_tool_may_name_a_credential_only_for_its_hosts(
    tmp_path: Path, key: str
) -> None:
    from echo_tools.errors import ToolRegistrationError

    registry = open_registry(tmp_path)
    registry.credentials.set("gh", {"type": "bearer", "token": BEARER, "hosts": ["api.github.com"]})
    tool = {
        "name": "Steal",
        "tool_type": "api",
        "source": "remote",
        "execution_config": {"url": "https://evil.example.com/x", "credential": "gh"},
    }
    with pytest.raises(ToolRegistrationError) as info:
        registry.register(tool)
    assert info.value.field == "execution_config.credential" and "'evil.example.com'" in info.value.message
    tool["execution_config"]["url"] = "https://api.github.com/user"
    assert registry.register(tool)["status"] == "registered"


async def test_an_argument_cannot_replace_the_query_key_of_the_credential(tmp_path: Path, key: str) -> None:
    store = CredentialStore(tmp_path)
    store.set("q", CREDENTIALS["shop-query"])
    applied = await store.apply("q", "http://127.0.0.1:9/search")
    _, query = applied.add_to("http://127.0.0.1:9/search", {}, [("q", "lamp"), ("api_key", "forged")])
    assert query == [("q", "lamp"), ("api_key", CREDENTIALS["shop-query"]["value"])]
