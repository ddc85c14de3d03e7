"""The gate: principals from a file (keys kept hashed), actions checked per route (401/403 naming the
action and the principal), `X-Echo-User` only for principals acting for users, and the budget meter
shared by every call of one request."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import ToolBudgetError, ToolConfigError, ToolExecutor
from echo_tools.api import create_app
from echo_tools.gate import OPERATOR, Budget, BudgetMeter, Grants, Principal, hash_key, load_principals
from echo_tools.models import ToolContext, ToolPermission
from echo_tools.settings import ApiSettings
from tests.echo_tools._api_support import ADD, ECHO, GUARDED, make_registry

IDE_KEY = "ide-key-0123456789"
READER_KEY = "reader-key-0123456789"
OPERATOR_KEY = "operator-key-0123456789"


def principals_file(folder: Path) -> Path:
    path = folder / "principals.json"
    path.write_text(
        json.dumps(
            {
                "principals": [
                    {"name": "ide", "key_sha256": hash_key(IDE_KEY), "actions": ["invoke", "run"],
                     "permissions": ["net:outbound"], "budget": {"max_calls": 10}},
                    {"name": "reader", "key_sha256": hash_key(READER_KEY), "actions": []},
                ]
            }
        )
    )  # fmt: skip
    return path


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    registry = make_registry(tmp_path / "tools", ECHO, ADD, GUARDED)
    executor = ToolExecutor(registry)
    settings = ApiSettings(api_key=OPERATOR_KEY, principals=load_principals(principals_file(tmp_path)))
    app = create_app(registry, executor, settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
        yield c
    await executor.aclose()


def key(value: str) -> dict[str, str]:
    return {"X-API-Key": value}


async def test_a_key_of_no_principal_is_401(client: httpx.AsyncClient) -> None:
    response = await client.get("/tools/list", headers=key("nobody-key-0123456"))
    assert response.status_code == 401
    assert response.json()["error_type"] == "unauthorized"


async def test_an_invoke_is_gated_before_its_body_is_read(client: httpx.AsyncClient) -> None:
    # the gate and the body read are one dependency on the invoke routes: the key still comes first
    for path in ("/tools/invoke/adder", "/tools/invoke/id/tool_adder"):
        unknown = await client.post(path, content=b"{not json", headers=key("nobody-key-0123456"))
        assert unknown.status_code == 401 and unknown.json()["error_type"] == "unauthorized"
        reader = await client.post(path, content=b"{not json", headers=key(READER_KEY))
        assert reader.status_code == 403 and reader.json()["field"] == "action"
        allowed = await client.post(path, content=b"{not json", headers=key(IDE_KEY))
        assert allowed.status_code == 422 and allowed.json()["field"] == "body"
        ran = await client.post(path, json={"a": 1, "b": 2}, headers=key(IDE_KEY))
        assert ran.status_code == 200 and ran.json()["output"] == {"sum": 3}


async def test_an_action_outside_the_grant_is_403_naming_the_action_and_the_principal(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/tools/register", json=ECHO, headers=key(IDE_KEY))
    assert response.status_code == 403
    body = response.json()
    assert body["error_type"] == "permission_denied" and body["field"] == "action"
    assert "'ide'" in body["message"] and "'register'" in body["message"]
    reader = await client.post("/tools/invoke/adder", json={"a": 1, "b": 2}, headers=key(READER_KEY))
    assert reader.status_code == 403 and "'reader'" in reader.json()["message"]


async def test_every_principal_reads_the_catalogue_and_health_needs_no_key(client: httpx.AsyncClient) -> None:
    assert (await client.get("/tools/list", headers=key(READER_KEY))).status_code == 200
    assert (await client.get("/tools/health")).status_code == 200


async def test_the_principal_s_permissions_are_the_ceiling_of_its_calls(client: httpx.AsyncClient) -> None:
    ok = await client.post("/tools/invoke/adder", json={"a": 1, "b": 2}, headers=key(IDE_KEY))
    assert ok.status_code == 200 and ok.json()["output"] == {"sum": 3}
    refused = await client.post("/tools/invoke/guarded", json={"text": "x"}, headers=key(IDE_KEY))
    assert refused.status_code == 403 and refused.json()["error_type"] == "permission_denied"
    operator = await client.post("/tools/invoke/guarded", json={"text": "x"}, headers=key(OPERATOR_KEY))
    assert operator.status_code == 200


async def test_x_echo_user_is_refused_for_a_principal_that_does_not_act_for_users(
    client: httpx.AsyncClient,
) -> None:
    headers = {**key(IDE_KEY), "X-Echo-User": "alice"}
    response = await client.post("/tools/invoke/adder", json={"a": 1, "b": 2}, headers=headers)
    assert response.status_code == 403
    assert response.json()["field"] == "headers.x-echo-user"
    as_operator = {**key(OPERATOR_KEY), "X-Echo-User": "alice"}
    assert (
        await client.post("/tools/invoke/adder", json={"a": 1, "b": 2}, headers=as_operator)
    ).status_code == 200


def test_a_key_in_clear_in_the_principals_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"principals": [{"name": "x", "key": "secret-123456"}]}))
    with pytest.raises(ToolConfigError, match="key_sha256") as caught:
        load_principals(path)
    assert caught.value.field == "key"


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"name": "x", "key_sha256": "abc"}, "key_sha256"),
        ({"name": "", "key_sha256": "a" * 64}, "name"),
        ({"name": "x", "key_sha256": "a" * 64, "actions": ["fly"]}, "actions"),
        ({"name": "x", "key_sha256": "a" * 64, "permissions": ["root"]}, "permissions"),
        ({"name": "x", "key_sha256": "a" * 64, "budget": {"max_calls": 0}}, "max_calls"),
        ({"name": "x", "key_sha256": "a" * 64, "budget": {"max_cals": 3}}, "budget"),
    ],
)
def test_a_bad_principals_entry_names_its_field(tmp_path: Path, entry: dict[str, Any], field: str) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"principals": [entry]}))
    with pytest.raises(ToolConfigError) as caught:
        load_principals(path)
    assert caught.value.field == field
    assert "principals[0]" in caught.value.message


def test_the_operator_may_do_everything() -> None:
    assert OPERATOR.grants.admin and OPERATOR.granted_permissions is None
    assert all(OPERATOR.may(a) for a in ("invoke", "register", "credentials", "mcp", "approve"))
    ide = Principal("ide", Grants(permissions=["fs:read"], actions={"invoke"}))
    assert ide.granted_permissions == [ToolPermission.FS_READ]
    assert not ide.may("register") and ide.may("invoke")
    assert ide.owns("ide") and not ide.owns("operator") and not ide.owns(None) and OPERATOR.owns("ide")


def test_the_meter_names_the_limit_and_its_value() -> None:
    meter = BudgetMeter(Budget(max_calls=2, max_llm_calls=1, max_llm_tokens=100))
    assert meter.admit("t", 0) is None and meter.admit("t", 1) is None
    spent = meter.admit("t", 1)
    assert isinstance(spent, ToolBudgetError)
    assert spent.field == "budget.max_calls" and "max_calls=2" in spent.message
    assert meter.sample(60) is None
    assert meter.sample(10).field == "budget.max_llm_calls"  # type: ignore[union-attr]
    deep = BudgetMeter(Budget(max_depth=2)).admit("t", 3)
    assert deep is not None and deep.field == "budget.max_depth"


async def test_copies_of_a_context_share_one_meter(tmp_path: Path) -> None:
    registry = make_registry(tmp_path / "tools", ADD)
    executor = ToolExecutor(registry)
    meter = BudgetMeter(Budget(max_calls=3))
    context = ToolContext(budget=meter)
    copies = [context.model_copy(update={"depth": 1}) for _ in range(4)]
    results = [await executor.invoke("adder", {"a": 1, "b": 1}, c) for c in copies]
    assert [r.success for r in results] == [True, True, True, False]
    assert results[-1].error_type == "budget" and results[-1].error_field == "budget.max_calls"
    assert meter.calls == 3 and meter.in_flight == 0
    await executor.aclose()


def test_the_sync_path_counts_against_the_same_meter(tmp_path: Path) -> None:
    registry = make_registry(tmp_path / "tools", ADD)
    executor = ToolExecutor(registry)
    meter = BudgetMeter(Budget(max_output_bytes=10))
    first = executor.invoke_sync("adder", {"a": 1, "b": 1}, ToolContext(budget=meter))
    assert first.success  # {"sum": 2} is 10 bytes
    second = executor.invoke_sync("adder", {"a": 1, "b": 1}, ToolContext(budget=meter))
    assert not second.success and second.error_field == "budget.max_output_bytes"
    executor.close()


def test_serve_with_a_bad_principals_file_exits_2_naming_the_entry(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from echo_tools.cli.main import main

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"principals": [{"name": "ide", "key": "in-clear-123456"}]}))
    code = main(["--storage", str(tmp_path / "tools"), "serve", "--principals", str(path), "--port", "1"])
    assert code == 2
    err = capsys.readouterr().err
    assert "serve --principals" in err and "principals[0]" in err and "key_sha256" in err
