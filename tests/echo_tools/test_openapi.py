"""import_openapi: what an operation becomes, re-imports, and every bad document named by its JSON pointer."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from echo_tools import EgressPolicy, ToolExecutor, ToolRegistry
from echo_tools.openapi import OpenApiError, import_openapi, import_openapi_report
from tests.echo_tools._thirdparty_support import ShopService, shop_spec

BASE = "http://127.0.0.1:9"


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(egress=EgressPolicy.local())


@pytest.fixture
def shop() -> Iterator[ShopService]:
    service = ShopService().start()
    yield service
    service.stop()


def spec_with(paths: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "openapi": "3.0.3",
        "info": {"title": "T", "version": "1"},
        "servers": [{"url": BASE}],
        "paths": paths,
        **extra,
    }


def get_op(**op: Any) -> dict[str, Any]:
    return {"get": {"responses": {"200": {"description": "ok"}}, **op}}


# -- what an operation becomes ---------------------------------------------------------------------------


def test_a_31_document_becomes_one_api_tool_per_operation(registry: ToolRegistry) -> None:
    tools = import_openapi(registry, shop_spec(BASE), provider="shop", credential="shop-bearer")
    assert [t.tool_id for t in tools] == [
        "shop_get_item",
        "shop_create_order",
        "shop_get_search",
        "shop_get_account",
        "shop_list_reports",
        "shop_go_away",
    ]
    item = registry.require("shop_get_item")
    assert item.name == "Get one item" and registry.resolve("Get one item") is item
    assert item.input_schema == {
        "type": "object",
        "properties": {
            "X-Request-Id": {"type": "string"},
            "item_id": {"type": "integer"},
            "fields": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["item_id"],
        "additionalProperties": False,
    }
    assert item.execution_config["url"] == f"{BASE}/items/{{item_id}}"
    assert item.execution_config["credential"] == "shop-bearer"
    assert item.metadata["operation"] == "get_item" and item.metadata["operation_id"] == "getItem"
    assert item.metadata["credential"] == "shop-bearer" and item.metadata["provider"] == "shop"
    assert item.source.value == "openapi" and {"provider:shop", "source:openapi"} <= set(item.tags)
    assert item.side_effect.value == "idempotent" and item.version == "2.1"

    order = registry.require("shop_create_order")
    # body properties are top-level; readOnly `id` is the server's; $ref inlined; 3.1 type lists kept
    assert order.input_schema["properties"] == {
        "item_id": {"type": "integer", "description": "what to order"},
        "quantity": {"type": "integer", "minimum": 1, "maximum": 99},
        "note": {"type": ["string", "null"]},
    }
    assert order.input_schema["required"] == ["item_id", "quantity"]
    assert order.side_effect.value == "external"
    assert registry.require("shop_get_account").name == "get_account"  # no summary: the id


async def test_imported_tools_send_path_query_header_and_body_where_the_spec_says(
    registry: ToolRegistry, shop: ShopService, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_openapi(registry, shop_spec(shop.base), provider="shop", credential="shop-bearer")
    registry.credentials.set("shop-bearer", {"type": "bearer", "token": "bearer-secret-7f3a9c01"})
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        result = await executor.invoke(
            "Get one item", {"item_id": 42, "fields": ["name", "price"], "X-Request-Id": "req-1"}
        )
    finally:
        await executor.aclose()
    assert result.success, result.error
    assert result.output == {"id": 42, "fields": "name,price", "request_id": "req-1"}


def test_swagger_2_body_parameters_collection_formats_and_host(registry: ToolRegistry) -> None:
    spec = {
        "swagger": "2.0",
        "info": {"title": "Pets", "version": "1"},
        "host": "pets.example.com",
        "basePath": "/v1",
        "schemes": ["http", "https"],
        "definitions": {"Pet": {"type": "object", "properties": {"name": {"type": "string"}}}},
        "paths": {
            "/pets": {
                "post": {
                    "operationId": "addPet",
                    "parameters": [
                        {
                            "name": "pet",
                            "in": "body",
                            "required": True,
                            "schema": {"$ref": "#/definitions/Pet"},
                        }
                    ],
                    "responses": {"200": {"description": "ok"}},
                },
                "get": {
                    "operationId": "listPets",
                    "parameters": [
                        {
                            "name": "tags",
                            "in": "query",
                            "type": "array",
                            "items": {"type": "string"},
                            "collectionFormat": "multi",
                        },
                        {
                            "name": "limit",
                            "in": "query",
                            "type": "integer",
                            "maximum": 50,
                            "exclusiveMaximum": True,
                        },
                    ],
                    "responses": {"200": {"description": "ok"}},
                },
            }
        },
    }
    tools = {t.tool_id: t for t in import_openapi(registry, spec, provider="pets")}
    assert tools["pets_add_pet"].execution_config["url"] == "https://pets.example.com/v1/pets"
    assert tools["pets_add_pet"].input_schema["properties"] == {"name": {"type": "string"}}
    listing = tools["pets_list_pets"]
    assert listing.input_schema["properties"]["limit"] == {"type": "integer", "exclusiveMaximum": 50}
    assert listing.execution_config["arguments"]["tags"] == {
        "in": "query",
        "name": "tags",
        "style": "form",
        "explode": True,
    }


def test_openapi_30_nullable_becomes_a_type_list_and_a_clashing_body_is_one_property(
    registry: ToolRegistry,
) -> None:
    op = {
        "post": {
            "operationId": "PUT-Thing v2",
            "parameters": [{"name": "name", "in": "query", "schema": {"type": "string", "nullable": True}}],
            "requestBody": {
                "content": {
                    "application/json": {
                        "schema": {"type": "object", "properties": {"name": {"type": "string"}}}
                    }
                }
            },
            "responses": {"200": {"description": "ok"}},
        }
    }
    (tool,) = import_openapi(registry, spec_with({"/things": op}), provider="acme")
    assert tool.tool_id == "acme_put_thing_v2"
    assert tool.input_schema["properties"]["name"] == {"type": ["string", "null"]}
    assert tool.input_schema["properties"]["body"] == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
    }
    assert tool.execution_config["arguments"]["body"] == {"in": "body", "name": "body"}


def test_a_recursive_schema_is_cut_where_it_recurs(registry: ToolRegistry) -> None:
    components = {
        "schemas": {
            "Node": {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/Node"}}}
        }
    }
    op = {
        "post": {
            "operationId": "addNode",
            "requestBody": {
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}
            },
            "responses": {},
        }
    }
    (tool,) = import_openapi(registry, spec_with({"/nodes": op}, components=components), provider="tree")
    assert tool.input_schema["properties"]["child"] == {
        "description": "(recursive: #/components/schemas/Node)"
    }


def test_ids_derived_from_method_and_path_are_stable_and_names_are_made_unique(
    registry: ToolRegistry,
) -> None:
    paths = {
        "/status/{code}": get_op(
            summary="Status",
            parameters=[{"name": "code", "in": "path", "required": True, "schema": {"type": "string"}}],
        ),
        "/status": get_op(summary="Status"),
    }
    first = [t.tool_id for t in import_openapi(registry, spec_with(paths), provider="web")]
    again = [t.tool_id for t in import_openapi(registry, spec_with(paths), provider="web")]
    assert first == again == ["web_get_status_code", "web_get_status"]
    assert [registry.require(i).name for i in first] == ["Status", "Status (get_status)"]


def test_reimporting_a_changed_spec_updates_its_tools_and_disables_vanished_operations(
    registry: ToolRegistry,
) -> None:
    spec = shop_spec(BASE)
    import_openapi(registry, spec, provider="shop")
    changed = copy.deepcopy(spec)
    del changed["paths"]["/reports"]
    changed["paths"]["/items/{item_id}"]["get"]["summary"] = "Fetch one item"
    report = import_openapi_report(registry, changed, provider="shop")
    assert report.disabled == ["shop_list_reports"]
    assert registry.require("shop_list_reports").status.value == "disabled"
    assert registry.require("shop_get_item").name == "Fetch one item"
    back = import_openapi_report(registry, spec, provider="shop")
    assert back.disabled == [] and registry.require("shop_list_reports").status.value == "active"


def test_only_the_named_operations_are_imported(registry: ToolRegistry) -> None:
    tools = import_openapi(
        registry, shop_spec(BASE), provider="shop", operations=["createOrder", "get_search"]
    )
    assert [t.tool_id for t in tools] == ["shop_create_order", "shop_get_search"]


def test_a_spec_file_and_a_yaml_file_import_alike(registry: ToolRegistry, tmp_path: Path) -> None:
    import yaml

    (tmp_path / "spec.json").write_text(json.dumps(shop_spec(BASE)), encoding="utf-8")
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(shop_spec(BASE), sort_keys=False), encoding="utf-8")
    one = [t.tool_id for t in import_openapi(registry, tmp_path / "spec.json", provider="shop")]
    two = [t.tool_id for t in import_openapi(registry, str(tmp_path / "spec.yaml"), provider="shop")]
    assert one == two and len(one) == 6


def test_a_spec_url_is_fetched_under_the_egress_policy(shop: ShopService) -> None:
    allowed = ToolRegistry(egress=EgressPolicy.local())
    assert len(import_openapi(allowed, f"{shop.base}/openapi.json", provider="shop")) == 6
    strict = ToolRegistry()
    with pytest.raises(OpenApiError, match="loopback") as info:
        import_openapi(strict, f"{shop.base}/openapi.json", provider="shop")
    assert info.value.field == "spec"


# -- bad input ---------------------------------------------------------------------------------------------


def bad(registry: ToolRegistry, spec: Any, **kwargs: Any) -> OpenApiError:
    with pytest.raises(OpenApiError) as info:
        import_openapi(registry, spec, **{"provider": "bad", **kwargs})
    return info.value


def test_a_file_that_does_not_parse_is_named_with_line_and_column(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    path = tmp_path / "spec.json"
    path.write_text('{"openapi": "3.0.0",\n  "paths": {,}}', encoding="utf-8")
    error = bad(registry, path)
    assert str(path) in error.message and "line 2 column" in error.message


@pytest.mark.parametrize(
    ("spec", "pointer", "named"),
    [
        ({"info": {}}, "/openapi", "neither 'openapi'"),
        ({"openapi": "4.0.0", "paths": {}}, "/openapi", "'4.0.0'"),
        ({"swagger": "1.2", "paths": {}}, "/swagger", "'1.2'"),
        ({"openapi": "3.0.0", "servers": [{"url": BASE}], "paths": []}, "/paths", "list"),
        (spec_with({"items": get_op()}), "/paths/items", "must start with '/'"),
        (spec_with({"/a": get_op(operationId=5)}), "/paths/~1a/get/operationId", "5"),
        (spec_with({"/a": get_op(parameters=[{"in": "query"}])}), "/paths/~1a/get/parameters/0", "'name'"),
        (
            spec_with({"/a": get_op(parameters=[{"name": "x", "in": "body2"}])}),
            "/paths/~1a/get/parameters/0/in",
            "'body2'",
        ),
        (
            spec_with({"/a": get_op(parameters=[{"$ref": "https://evil.example/p.json#/x"}])}),
            "/paths/~1a/get/parameters/0/$ref",
            "'https://evil.example/p.json#/x'",
        ),
        (
            spec_with({"/a": get_op(parameters=[{"$ref": "#/components/parameters/Nope"}])}),
            "/paths/~1a/get/parameters/0/$ref",
            "points to nothing",
        ),
        (
            {"openapi": "3.0.0", "paths": {"/a": get_op()}},
            "/servers",
            "give base_url",
        ),
    ],
)
def test_a_document_that_does_not_validate_is_named_by_its_json_pointer(
    registry: ToolRegistry, spec: dict[str, Any], pointer: str, named: str
) -> None:
    error = bad(registry, spec)
    assert error.field == pointer
    assert named in error.message


def test_a_remote_ref_inside_a_schema_is_refused_naming_where(registry: ToolRegistry) -> None:
    op = {
        "post": {
            "operationId": "x",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "other.yaml#/Pet"}}}},
            "responses": {},
        }
    }
    error = bad(registry, spec_with({"/x": op}))
    assert error.field == "/paths/~1x/post/requestBody/content/application~1json/schema/$ref"
    assert "'other.yaml#/Pet'" in error.message


def test_a_ref_chain_past_the_depth_bound_is_refused(registry: ToolRegistry) -> None:
    schemas = {f"S{i}": {"$ref": f"#/components/schemas/S{i + 1}"} for i in range(40)}
    schemas["S40"] = {"type": "string"}
    op = {
        "post": {
            "operationId": "x",
            "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}},
            "responses": {},
        }
    }
    error = bad(registry, spec_with({"/x": op}, components={"schemas": schemas}))
    assert "more than 32 references" in error.message and error.field.startswith("/components/schemas/S")


@pytest.mark.parametrize(
    ("param", "reason"),
    [
        (
            {"name": "id", "in": "path", "required": True, "style": "matrix", "schema": {"type": "string"}},
            "style 'matrix'",
        ),
        ({"name": "sid", "in": "cookie", "schema": {"type": "string"}}, "cookie parameter"),
        ({"name": "f", "in": "query", "content": {"application/json": {}}}, "'content' serialisation"),
    ],
)
def test_unsupported_parameters_skip_the_operation_saying_which(
    registry: ToolRegistry, param: dict[str, Any], reason: str
) -> None:
    paths = {
        "/x/{id}": get_op(
            operationId="odd",
            parameters=[param, {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
            if param["name"] != "id"
            else [param],
        ),
        "/ok": get_op(operationId="fine"),
    }
    report = import_openapi_report(registry, spec_with(paths), provider="p")
    assert [t.tool_id for t in report.tools] == ["p_fine"]
    ((where, why),) = report.skipped
    assert where == "/paths/~1x~1{id}/get" and reason in why and f"'{param['name']}'" in why
    # asked for by name, the same operation is an error naming the reason
    error = bad(registry, spec_with(paths), provider="p", operations=["odd"])
    assert reason in error.message and error.field == "/paths/~1x~1{id}/get"


def test_bodies_neither_json_nor_form_are_skipped_naming_the_media_type(registry: ToolRegistry) -> None:
    # form bodies import (tests/echo_tools/test_openapi_wild.py); XML does not
    op = {
        "post": {
            "operationId": "upload",
            "requestBody": {"content": {"application/xml": {"schema": {}}}},
            "responses": {},
        }
    }
    report = import_openapi_report(registry, spec_with({"/up": op}), provider="p")
    assert report.tools == [] and "['application/xml']" in report.skipped[0][1]


@pytest.mark.parametrize(
    ("kwargs", "field", "named"),
    [
        ({"provider": "Bad Provider"}, "provider", "'Bad Provider'"),
        ({"operations": ["nope"]}, "operations", "'nope'"),
        ({"base_url": "ftp://x"}, "base_url", "'ftp://x'"),
    ],
)
def test_bad_arguments_are_named(
    registry: ToolRegistry, kwargs: dict[str, Any], field: str, named: str
) -> None:
    error = bad(registry, shop_spec(BASE), **kwargs)
    assert error.field == field and named in error.message


def test_a_credential_argument_that_is_not_a_name_is_refused(registry: ToolRegistry) -> None:
    from echo_tools.credentials import CredentialError

    with pytest.raises(CredentialError) as info:
        import_openapi(registry, shop_spec(BASE), provider="shop", credential="a b")
    assert info.value.field == "name" and "'a b'" in info.value.message


def test_a_spec_larger_than_the_bound_is_refused_before_parsing(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b'{"x": "' + b"a" * (10 * 1024 * 1024) + b'"}')
    error = bad(registry, path)
    assert "larger than 10485760 bytes" in error.message and error.field == "spec"


def test_a_missing_file_is_named(registry: ToolRegistry, tmp_path: Path) -> None:
    error = bad(registry, tmp_path / "nope.json")
    assert "nope.json" in error.message and "cannot be read" in error.message


@pytest.mark.parametrize("value", ["..", "."])
async def test_a_path_argument_cannot_climb_out_of_its_path(
    registry: ToolRegistry, shop: ShopService, value: str
) -> None:
    # `/capture/sub/{x}` with x=".." would be sent as `/capture/sub/..`, which the client normalises to
    # `/capture`: an LLM could reach any other endpoint of the API, with the tool's credential
    param = {"name": "x", "in": "path", "required": True, "schema": {"type": "string"}}
    spec = spec_with({"/capture/sub/{x}": get_op(operationId="sub", parameters=[param])})
    import_openapi(registry, spec, provider="p", base_url=shop.base)
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    try:
        result = await executor.invoke("p_sub", {"x": value})
    finally:
        await executor.aclose()
    assert not result.success and result.error_type == "validation"
    assert "input.x" in result.error and repr(value) in result.error
    assert shop.captured == []


def test_an_operation_whose_schemas_expand_past_the_bound_is_skipped(registry: ToolRegistry) -> None:
    # sixteen levels of two references each: 2**16 copies of the leaf once inlined
    schemas = {
        f"L{i}": {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/components/schemas/L{i + 1}"},
                "b": {"$ref": f"#/components/schemas/L{i + 1}"},
            },
        }
        for i in range(16)
    }
    schemas["L16"] = {"type": "string"}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}
    paths = {
        "/boom": {"post": {"operationId": "boom", "requestBody": body, "responses": {}}},
        "/ok": get_op(operationId="ok"),
    }
    report = import_openapi_report(registry, spec_with(paths, components={"schemas": schemas}), provider="p")
    assert [t.tool_id for t in report.tools] == ["p_ok"]
    assert report.skipped[0][0] == "/paths/~1boom/post" and "past 20000 nodes" in report.skipped[0][1]


def test_a_schema_nested_past_the_bound_skips_its_operation(registry: ToolRegistry) -> None:
    deep: dict[str, Any] = {"type": "string"}
    for _ in range(200):
        deep = {"type": "array", "items": deep}
    body = {"content": {"application/json": {"schema": deep}}}
    paths = {"/deep": {"post": {"operationId": "deep", "requestBody": body, "responses": {}}}}
    report = import_openapi_report(registry, spec_with(paths), provider="p")
    assert report.tools == [] and "nests deeper than 64 levels" in report.skipped[0][1]


def test_a_document_nested_past_the_parsers_limit_is_refused(registry: ToolRegistry, tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"openapi": "3.0.0", "x": ' + "[" * 200_000 + "]" * 200_000 + "}", encoding="utf-8")
    error = bad(registry, path)
    assert error.field == "spec" and "nests too deeply" in error.message
