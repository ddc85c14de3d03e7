"""The canvas's "Third-party Tool" template `{provider, action, credentials}` binds the imported tool and
the run calls it with the named credential."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry
from echo_tools.credentials import SECRET_KEY_ENV, new_key
from echo_tools.openapi import import_openapi
from tests.echo_tools._thirdparty_support import CREDENTIALS, ShopService, shop_spec


@pytest.fixture
def shop() -> Iterator[ShopService]:
    service = ShopService().start()
    yield service
    service.stop()


@pytest.fixture
def registry(tmp_path: Path, shop: ShopService, monkeypatch: pytest.MonkeyPatch) -> ToolRegistry:
    monkeypatch.setenv(SECRET_KEY_ENV, new_key())
    registry = ToolRegistry(storage_dir=tmp_path, egress=EgressPolicy.local())
    import_openapi(registry, shop_spec(shop.base), provider="shop", credential="shop")
    return registry


def canvas(config: dict[str, Any]) -> dict[str, Any]:
    entry = {"id": 3, "name": "Third-party Tool", "type": "tools", "enabled": True, "config": config}
    nodes = [
        {"id": 1, "type": "Start", "name": "Start", "config": {}},
        {
            "id": 2,
            "type": "Agent",
            "name": "Buyer",
            "config": {"prompt": "Place the order.", "tools": [entry]},
        },
        {"id": 9, "type": "End", "name": "End", "config": {}},
    ]
    connections = [{"id": 900, "from": 1, "to": 2}, {"id": 901, "from": 2, "to": 9}]
    return {"canvas_nodes": nodes, "connections": connections, "workflow_name": "Orders"}


TEMPLATE = {"provider": "shop", "action": "createOrder", "credentials": "shop", "description": "orders"}


def test_a_template_entry_binds_the_providers_tool_by_action(registry: ToolRegistry) -> None:
    from workflow_bridge.node_mapper import NodeMapper

    mapped = NodeMapper(registry).map_canvas(canvas(TEMPLATE))
    (agent,) = [a for a in mapped.agents.values() if a["name"] == "Buyer"]
    assert agent["tools"] == ["shop_create_order"]
    assert agent["tool_bindings"][0]["config"]["credentials"] == "shop"
    # the credential is not stored yet: a warning at map time, the call fails naming it
    assert [(d.level, d.field) for d in mapped.diagnostics] == [
        ("warning", "config.tools[0].config.credentials")
    ]


@pytest.mark.parametrize(
    ("config", "field", "named"),
    [
        ({**TEMPLATE, "action": "refundOrder"}, "config.tools[0].config.action", "'refundOrder'"),
        ({**TEMPLATE, "provider": "slack"}, "config.tools[0].config.action", "provider:slack"),
        ({**TEMPLATE, "credentials": "other"}, "config.tools[0].config.credentials", "'other'"),
        ({"action": "createOrder"}, "config.tools[0].config.provider", "config.provider"),
    ],
)
def test_a_template_that_cannot_bind_is_an_error_naming_the_field(
    registry: ToolRegistry, config: dict[str, Any], field: str, named: str
) -> None:
    from workflow_bridge.node_mapper import NodeMapper

    mapped = NodeMapper(registry).map_canvas(canvas(config))
    errors = [d for d in mapped.diagnostics if d.level == "error"]
    assert [d.field for d in errors] == [field]
    assert named in errors[0].message


def test_the_run_calls_the_third_party_api_with_the_named_credential(
    registry: ToolRegistry, shop: ShopService
) -> None:
    from workflow_bridge.runner import run_workflow

    registry.credentials.set("shop", CREDENTIALS["shop-key"])
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    events: list[dict[str, Any]] = []
    try:
        run_workflow(
            canvas(TEMPLATE),
            registry=registry,
            executor=executor,
            user_input='Order this: {"item_id": 7, "quantity": 2}',
            llm="rehearsal",
            on_event=events.append,
        )
    finally:
        executor.close()
    completed = [e for e in events if e.get("type") == "tool.completed"]
    assert [e["tool_id"] for e in completed] == ["shop_create_order"]
    assert completed[0]["output"]["status"] == "created"
    assert completed[0]["output"]["order"] == {"item_id": 7, "quantity": 2}
