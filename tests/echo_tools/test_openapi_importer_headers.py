"""Header parameters that set a request's framing or routing (`Host`, `Content-Length`,
`Transfer-Encoding`, `Connection`, hop-by-hop headers) are refused: at OpenAPI import (the operation is
skipped, naming the parameter) and at `api` tool registration (naming the field)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from echo_tools.egress import FRAMING_HEADERS
from echo_tools.errors import ToolRegistrationError
from echo_tools.openapi import import_openapi, import_openapi_report
from echo_tools.openapi.document import OpenApiError
from echo_tools.registry import ToolRegistry

ATTACKS = ["Host", "Content-Length", "Transfer-Encoding", "Connection", "keep-alive", "TE", "Upgrade"]


def _spec(header: str) -> dict[str, Any]:
    param = {"name": header, "in": "header", "required": True, "schema": {"type": "string"}}
    ok = {"200": {"description": "ok"}}
    return {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": {
            "/routed": {"get": {"operationId": "routed", "parameters": [param], "responses": ok}},
            "/plain": {"get": {"operationId": "plain", "responses": ok}},
        },
    }


@pytest.mark.parametrize("header", ATTACKS)
def test_an_operation_with_a_framing_header_parameter_is_skipped_naming_it(
    tmp_path: Path, header: str
) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    report = import_openapi_report(registry, _spec(header), provider="attack")
    assert [t.tool_id for t in report.tools] == ["attack_plain"]
    ((where, reason),) = report.skipped
    assert (
        where == "/paths/~1routed/get" and f"header {header!r}" in reason and "framing or routing" in reason
    )
    assert registry.get("attack_routed") is None


def test_asking_for_that_operation_by_name_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    registry = ToolRegistry(storage_dir=tmp_path)
    with pytest.raises(OpenApiError) as caught:
        import_openapi(registry, _spec("Host"), provider="attack", operations=["routed"])
    assert caught.value.field == "/paths/~1routed/get" and "'Host'" in caught.value.message
    assert registry.list_by_tags(["provider:attack"]) == []


def _api_tool(**config: Any) -> dict[str, Any]:
    return {
        "name": "Routed",
        "tool_type": "api",
        "input_schema": {"type": "object", "properties": {}},
        "execution_config": {"url": "https://api.example.com/x", "method": "GET", **config},
    }


@pytest.mark.parametrize("header", ATTACKS)
def test_an_api_tool_setting_a_framing_header_is_refused_at_registration(header: str) -> None:
    registry = ToolRegistry(storage_dir=None)
    with pytest.raises(ToolRegistrationError) as caught:
        registry.register(_api_tool(headers={header: "x"}))
    assert caught.value.field == f"execution_config.headers.{header}"
    assert f"header {header!r}" in caught.value.message
    assert registry.get("tool_routed") is None


def test_an_api_tool_sending_an_argument_as_the_host_header_is_refused_at_registration() -> None:
    arguments = {"target": {"in": "header", "name": "Host", "style": "simple", "explode": False}}
    registry = ToolRegistry(storage_dir=None)
    with pytest.raises(ToolRegistrationError) as caught:
        registry.register(_api_tool(arguments=arguments))
    assert caught.value.field == "execution_config.arguments.target" and "'Host'" in caught.value.message


def test_ordinary_headers_are_still_allowed() -> None:
    registry = ToolRegistry(storage_dir=None)
    registry.register(_api_tool(headers={"X-Trace": "1", "Accept": "application/json"}))
    assert registry.require("tool_routed").execution_config["headers"] == {
        "X-Trace": "1",
        "Accept": "application/json",
    }
    assert {"host", "content-length", "transfer-encoding", "connection"} <= FRAMING_HEADERS
