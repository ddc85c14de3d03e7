"""Redaction by value: a stored credential's secret, echoed back by a service under any key (or in an error
page), appears in no result, event, log line or HTTP answer. A real service on 127.0.0.1 echoes what it
was sent."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.api import create_app
from echo_tools.redaction import REDACTED, hide_secret_values, redact, remember_secrets
from echo_tools.settings import ApiSettings
from tests.agent_tools._http_support import RecordingServer, Reply, recording_server

SECRET = "s3cret-token-4711"
CREDENTIALS = {
    "bearer": {"type": "bearer", "token": SECRET},
    "basic": {"type": "basic", "username": "shop-user", "password": SECRET},
    "api_key": {"type": "api_key", "in": "header", "name": "X-Shop-Key", "value": SECRET},
}


def _sent(seen: Any) -> str:
    return seen.headers.get("authorization") or seen.headers.get("x-shop-key") or ""


@pytest.fixture(scope="module")
def echo_service() -> Iterator[RecordingServer]:
    routes = {
        "/echo": lambda seen: Reply(
            body={"seen": _sent(seen), "nested": [{"note": f"you sent {_sent(seen)}"}]}
        ),
        "/text": lambda seen: Reply(body=f"hello, {_sent(seen)}", content_type="text/plain"),
        "/deny": lambda seen: Reply(
            401, body=f"credentials {_sent(seen)} refused", content_type="text/plain"
        ),
    }
    with recording_server(routes) as running:
        yield running


def _registry(service: RecordingServer, kind: str) -> ToolRegistry:
    registry = ToolRegistry(storage_dir=None, egress=EgressPolicy.local())
    registry.credentials.set("shop", CREDENTIALS[kind])
    for path in ("echo", "text", "deny"):
        registry.register(
            {
                "tool_id": f"shop_{path}",
                "name": f"Shop {path}",
                "tool_type": "api",
                "input_schema": {"type": "object", "properties": {}},
                "execution_config": {"url": f"{service.url}/{path}", "method": "GET", "credential": "shop"},
            }
        )
    return registry


BASIC_PAIR = base64.b64encode(f"shop-user:{SECRET}".encode()).decode()  # what Basic sends for the pair


def _leaked(value: Any) -> bool:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return SECRET in text or BASIC_PAIR in text


@pytest.mark.parametrize("kind", sorted(CREDENTIALS))
async def test_an_echoed_credential_is_in_no_result_event_or_log_line(
    echo_service: RecordingServer, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    registry = _registry(echo_service, kind)
    log = MemoryEventLog()
    executor = ToolExecutor(registry, [log], egress=EgressPolicy.local())
    try:
        echoed = await executor.invoke("shop_echo", {})
        text = await executor.invoke("shop_text", {})
        denied = await executor.invoke("shop_deny", {})
    finally:
        await executor.aclose()
    assert SECRET in _sent(echo_service.seen[-1]) or BASIC_PAIR in _sent(echo_service.seen[-1])  # sent
    assert echoed.success and echoed.output["seen"].endswith(REDACTED)
    assert echoed.output["nested"][0]["note"].endswith(REDACTED)
    assert text.success and text.output.startswith("hello, ") and text.output.endswith(REDACTED)
    assert denied.success is False and "refused" in (denied.error or "")
    for value in (
        echoed.model_dump(),
        text.model_dump(),
        denied.model_dump(),
        [e.to_dict() for e in log.events],
    ):
        assert not _leaked(value)
    assert not _leaked(caplog.text)


async def test_an_echoed_credential_is_not_in_the_http_answer(echo_service: RecordingServer) -> None:
    registry = _registry(echo_service, "bearer")
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    app = create_app(registry, executor, ApiSettings())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answers = [await client.post(f"/tools/invoke/id/shop_{path}", json={}) for path in ("echo", "deny")]
    await executor.aclose()
    assert answers[0].status_code == 200
    assert "seen" in answers[0].text and "refused" in answers[1].text
    for answer in answers:
        assert not _leaked(answer.text)


def test_values_shorter_than_the_minimum_are_never_hidden() -> None:
    remember_secrets("abc", "remembered-secret-xyz")
    assert hide_secret_values("abc remembered-secret-xyz") == f"abc {REDACTED}"
    assert redact({"plain": ["say remembered-secret-xyz"]}) == {"plain": [f"say {REDACTED}"]}
    untouched = {"plain": ["nothing here"]}
    assert redact(untouched) is untouched
