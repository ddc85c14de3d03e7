"""OpenAPI documents as found in the wild: mistakes normalised with a warning, form bodies encoded."""

from __future__ import annotations

from echo_tools import ToolRegistry
from echo_tools.openapi import import_openapi_report
from echo_tools.openapi.request import build_mapped_request
from echo_tools.openapi.wild import normalise_schema


def test_python_type_names_and_required_true_on_a_property_are_normalised_with_warnings():
    warnings: list[tuple[str, str]] = []
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "str", "required": True},
            "tags": {"type": "list", "items": {"type": "bool"}},
            "note": {"type": "string", "required": False},
        },
        "required": ["other"],
    }
    fixed = normalise_schema(schema, "/s", warnings)
    assert fixed["properties"] == {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "boolean"}},
        "note": {"type": "string"},
    }
    assert fixed["required"] == ["other", "name"]
    assert [w for w, _ in warnings] == [
        "/s/properties/name/type",
        "/s/properties/tags/type",
        "/s/properties/tags/items/type",
        "/s/properties/name/required",
        "/s/properties/note/required",
    ]
    assert schema["properties"]["name"]["type"] == "str"  # the input is left as it was


SWAGGER = {
    "swagger": "2.0",
    "info": {"title": "upload", "version": "1"},
    "host": "api.example.com",
    "schemes": ["https"],
    "paths": {
        "/files": {
            "post": {
                "operationId": "upload",
                "consumes": ["multipart/form-data"],
                "parameters": [
                    {"in": "formData", "name": "file", "type": "file", "required": True},
                    {"in": "formData", "name": "label"},
                    {"in": "query", "name": "dry_run"},
                ],
                "responses": {"200": {"description": "ok"}},
            }
        }
    },
}


def test_swagger_form_data_with_a_file_becomes_a_multipart_body_and_untyped_parameters_strings():
    registry = ToolRegistry()
    report = import_openapi_report(registry, SWAGGER, provider="files")
    (tool,) = report.tools
    assert tool.execution_config["body_encoding"] == "multipart/form-data"
    assert tool.execution_config["files"] == ["file"]
    assert tool.input_schema["properties"]["label"] == {"type": "string"}
    assert tool.input_schema["properties"]["dry_run"] == {"type": "string"}
    assert tool.input_schema["required"] == ["file"]
    assert {w for w, _ in report.warnings} == {
        "/paths/~1files/post/parameters/1",
        "/paths/~1files/post/parameters/2",
    }

    method, url, query, body, headers = build_mapped_request(
        tool, {"file": "a,b\n", "label": "x", "dry_run": "1"}
    )
    assert (method, url, query) == ("POST", "https://api.example.com/files", [("dry_run", "1")])
    assert headers["Content-Type"] == body.content_type
    boundary = body.content_type.split("boundary=")[1]
    assert body.content.split(b"\r\n")[:4] == [
        f"--{boundary}".encode(),
        b'Content-Disposition: form-data; name="file"; filename="file"',
        b"Content-Type: application/octet-stream",
        b"",
    ]
    assert b'name="label"\r\n\r\nx\r\n' in body.content and body.content.endswith(
        f"--{boundary}--\r\n".encode()
    )
