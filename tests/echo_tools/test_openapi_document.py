"""Remote OpenAPI documents are bounded in total, not per operation: nodes after `$ref` expansion, YAML
aliases, stored bytes and tools per import. Each attack goes through a real `echo-tools serve`, whose
memory stays within 64 MiB of idle; each refusal names the limit and the value and stores nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.openapi import import_openapi
from echo_tools.openapi.document import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_NODES,
    MAX_IMPORT_TOOLS,
    OpenApiError,
    load_document,
)
from echo_tools.registry import ToolRegistry
from tests.agent_tools._http_support import RecordingServer, Reply, recording_server
from tests.echo_tools._egress_support import attack, attack_server

OK = {"200": {"description": "ok"}}


def _spec(paths: dict[str, Any], schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "openapi": "3.0.3",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "paths": paths,
    }
    if schemas:
        spec["components"] = {"schemas": schemas}
    return spec


def fan_out_spec(operations: int = 100, levels: int = 3, width: int = 12) -> dict[str, Any]:
    """Each operation's body is `L0`, whose `width` properties are each `L1`, ...: width**levels nodes
    per operation, under the per-operation bound, from a document of a few KB."""
    schemas: dict[str, Any] = {f"L{levels}": {"type": "string"}}
    for level in range(levels - 1, -1, -1):
        props = {f"p{i}": {"$ref": f"#/components/schemas/L{level + 1}"} for i in range(width)}
        schemas[f"L{level}"] = {"type": "object", "properties": props}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}
    shared = {"$ref": "#/components/requestBodies/B"}
    paths = {f"/{i}": {"post": {"requestBody": shared, "responses": OK}} for i in range(operations)}
    spec = _spec(paths, schemas)
    spec["components"]["requestBodies"] = {"B": body}
    return spec


def alias_bomb_yaml(levels: int = 8) -> str:
    """The billion laughs in YAML: each level lists the one before ten times, `info.title` the last."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels + 1):
        lines.append(f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 10)}]")
    lines += [
        "openapi: 3.0.3",
        f"info: {{title: *a{levels}, version: '1'}}",
        "servers: [{url: 'http://127.0.0.1:9'}]",
        "paths: {/x: {get: {operationId: x, responses: {'200': {description: ok}}}}}",
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def documents() -> Iterator[RecordingServer]:
    routes = {"/bomb.yaml": lambda seen: Reply(body=alias_bomb_yaml(), content_type="application/yaml")}
    with recording_server(routes) as running:
        yield running


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    with attack_server(tmp_path_factory.mktemp("attacked")) as url_and_pid:
        yield url_and_pid


def _stored(served: tuple[str, int]) -> str:
    return httpx.get(f"{served[0]}/tools", timeout=30).text


def test_ref_amplification_is_refused_by_the_total_node_bound_with_memory_bounded(served) -> None:
    spec = fan_out_spec()
    assert len(json.dumps(spec)) < 16_000  # a small document ...
    (answer,) = attack(served, ("POST", "/tools/import/openapi", {"spec": spec, "provider": "fanout"}))
    assert answer.status_code == 422, answer.text
    message = answer.json()["message"]
    assert f"more than {MAX_IMPORT_NODES} nodes" in message and "max_import_nodes" in message
    assert "fanout_" not in _stored(served)


def test_a_yaml_alias_bomb_fetched_by_url_is_refused_with_memory_bounded(served, documents) -> None:
    (answer,) = attack(
        served, ("POST", "/tools/import/openapi", {"spec": f"{documents.url}/bomb.yaml", "provider": "lol"})
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["field"] == "spec"
    assert "aliases" in answer.json()["message"] and str(MAX_IMPORT_NODES) in answer.json()["message"]
    assert "lol_" not in _stored(served)


def test_a_yaml_alias_bomb_in_a_file_is_refused_naming_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(alias_bomb_yaml())
    with pytest.raises(OpenApiError) as caught:
        load_document(path)
    assert caught.value.field == "spec" and "aliases" in caught.value.message


def test_yaml_anchors_within_the_bound_still_load(tmp_path: Path) -> None:
    path = tmp_path / "anchors.yaml"
    path.write_text(
        "openapi: 3.0.3\ninfo: {title: t, version: '1'}\nx-ok: &ok {description: ok}\n"
        "paths: {/a: {get: {operationId: a, responses: {'200': *ok}}}}\n"
    )
    document, _ = load_document(path)
    assert document["paths"]["/a"]["get"]["responses"]["200"] == {"description": "ok"}


def test_too_many_operations_are_refused_before_any_is_converted(tmp_path: Path) -> None:
    count = MAX_IMPORT_TOOLS + 1
    paths = {f"/op{i}": {"get": {"operationId": f"op{i}", "responses": OK}} for i in range(count)}
    registry = ToolRegistry(storage_dir=tmp_path)
    with pytest.raises(OpenApiError) as caught:
        import_openapi(registry, _spec(paths), provider="many")
    assert caught.value.field == "/paths"
    assert (
        f"{count} operations" in caught.value.message
        and f"at most {MAX_IMPORT_TOOLS}" in caught.value.message
    )
    assert registry.list_by_tags(["provider:many"]) == []


def test_an_import_storing_more_than_the_byte_bound_is_refused_and_stores_nothing(tmp_path: Path) -> None:
    big = {"type": "string", "description": "d" * 200_000}
    paths = {
        f"/op{i}": {"get": {"operationId": f"op{i}", "parameters": [{"name": "q", "in": "query", "schema": big}],
                            "responses": OK}}
        for i in range(MAX_IMPORT_BYTES // 200_000 + 2)
    }  # fmt: skip
    registry = ToolRegistry(storage_dir=tmp_path)
    with pytest.raises(OpenApiError) as caught:
        import_openapi(registry, _spec(paths), provider="heavy")
    assert f"more than {MAX_IMPORT_BYTES} bytes" in caught.value.message
    assert "max_import_bytes" in caught.value.message
    assert registry.list_by_tags(["provider:heavy"]) == []
