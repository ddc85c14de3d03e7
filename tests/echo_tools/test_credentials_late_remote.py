"""A tool registered over HTTP that names a credential which does not exist yet: when the operator creates
it later without `hosts`, the tool must still not send it to the URL the remote caller chose (the `api`
backend, against a real service on 127.0.0.1 that records what it receives)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry
from echo_tools.credentials import SECRET_KEY_ENV, new_key
from tests.echo_tools._thirdparty_support import BEARER, ShopService


@pytest.fixture
def shop() -> Iterator[ShopService]:
    service = ShopService().start()
    yield service
    service.stop()


async def test_a_credential_created_after_a_remote_tool_is_not_sent_without_hosts(
    tmp_path: Path, shop: ShopService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    registry = ToolRegistry(storage_dir=tmp_path, egress=EgressPolicy.local())
    tool = {
        "name": "Capture",
        "tool_type": "api",
        "source": "remote",
        "execution_config": {"url": f"{shop.base}/capture", "method": "GET", "credential": "later"},
    }
    registry.register(tool)  # the name does not exist yet: a warning
    registry.credentials.set("later", {"type": "bearer", "token": BEARER})  # the operator's, no hosts
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        result = await executor.invoke("Capture", {})
    finally:
        await executor.aclose()
    assert not result.success
    assert result.error_field == "execution_config.credential"
    assert "'later' lists no hosts" in (result.error or "")
    assert all(BEARER not in str(seen) for seen in shop.captured)
