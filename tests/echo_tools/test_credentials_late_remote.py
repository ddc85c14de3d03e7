"""A tool registered over HTTP that names a credential which does not exist yet: when the operator creates
it later without `hosts`, the tool must still not send it to the URL the remote caller chose (the `api`
backend, against a real service on 127.0.0.1 that records what it receives)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry
from echo_tools.credentials import SECRET_KEY_ENV, new_key
from echo_tools.errors import ToolRegistrationError
from tests.echo_tools._thirdparty_support import BEARER, ShopService


@pytest.fixture
def shop() -> Iterator[ShopService]:
    service = ShopService().start()
    yield service
    service.stop()


async def test_a_remote_tool_naming_a_credential_that_does_not_exist_yet_is_refused(
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
    with pytest.raises(ToolRegistrationError) as refused:
        registry.register(tool)  # a credential stored later must never go to a URL chosen before it
    assert refused.value.field == "execution_config.credential"
    assert "'later' does not exist" in refused.value.message
    assert registry.get("tool_capture") is None
    registry.credentials.set("later", {"type": "bearer", "token": BEARER})  # the operator's, no hosts
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    await executor.aclose()
    assert all(BEARER not in str(seen) for seen in shop.captured)
