"""OpenAPI import time: a generated 500-operation document, in memory and into a storage folder.

An import is one batch (`ToolRegistry.register_many`): every operation's tool is checked (the JSON Schema
meta-check once per schema shape), then all are written under one lock with one index write. Three
documents: every operation's schemas alike, alike but for their wording (descriptions), and all distinct
(the meta-check runs 500 times). The per-call cost of a credential is `bench_credentials.py`.

Run: .venv/bin/python bench/bench_openapi.py
"""

from __future__ import annotations

import sys
import tempfile
import time
import warnings
from pathlib import Path

warnings.simplefilter("ignore")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import report  # noqa: E402

from echo_tools import ToolRegistry  # noqa: E402
from echo_tools.openapi import import_openapi  # noqa: E402

ROUNDS = 3


def generated_spec(operations: int = 500, *, variety: str = "same") -> dict:
    """A 3.1 document of `operations` operations (a GET and a PUT per path).

    `variety`: "same" (every GET has one schema, every PUT another), "wording" (each parameter has its own
    description, as real documents do), "shape" (each body has its own property: no two schemas alike).
    """
    paths: dict = {}
    schemas: dict = {}
    for i in range(operations // 2):
        thing = "Thing" if variety != "shape" else f"Thing{i}"
        if variety == "shape":
            schemas[thing] = {"type": "object", "properties": {f"field{i}": {"type": "string"}}}
        paths[f"/things{i}/{{thing_id}}"] = {
            "get": {
                "operationId": f"getThing{i}",
                "summary": f"Get thing {i}",
                "parameters": [
                    {"name": "thing_id", "in": "path", "required": True, "schema": {"type": "integer"}},
                    {
                        "name": "fields",
                        "description": f"fields of thing {i} to return" if variety != "same" else "fields",
                        "in": "query",
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                ],
                "responses": {"200": {"description": "ok"}},
            },
            "put": {
                "operationId": f"putThing{i}",
                "summary": f"Replace thing {i}",
                "parameters": [
                    {"name": "thing_id", "in": "path", "required": True, "schema": {"type": "integer"}}
                ],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{thing}"}}},
                },
                "responses": {"200": {"description": "ok"}},
            },
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "Generated", "version": "1"},
        "servers": [{"url": "https://api.example.com"}],
        "components": {
            "schemas": {
                "Thing": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "id": {"type": "integer", "readOnly": True},
                        "name": {"type": "string"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                        "owner": {"$ref": "#/components/schemas/Owner"},
                    },
                },
                "Owner": {"type": "object", "properties": {"email": {"type": "string"}}},
                **schemas,
            }
        },
        "paths": paths,
    }


def import_rows() -> list[list]:
    rows = []
    for variety, label in (
        ("same", "schemas alike"),
        ("wording", "schemas alike but for descriptions"),
        ("shape", "every body schema distinct"),
    ):
        spec = generated_spec(variety=variety)
        memory, stored, again = [], [], []
        for _ in range(ROUNDS):  # the machine is shared: the best round of each
            start = time.perf_counter()
            count = len(import_openapi(ToolRegistry(), spec, provider="gen"))
            memory.append(time.perf_counter() - start)
            with tempfile.TemporaryDirectory() as folder:
                registry = ToolRegistry(storage_dir=folder)
                start = time.perf_counter()
                import_openapi(registry, spec, provider="gen")
                stored.append(time.perf_counter() - start)
                start = time.perf_counter()
                import_openapi(registry, spec, provider="gen")
                again.append(time.perf_counter() - start)
                assert len(ToolRegistry(storage_dir=folder)) == count
        rows.append([f"{count} operations, {label}: in-memory registry", min(memory) * 1000, "ms"])
        rows.append([f"{count} operations, {label}: into a storage folder", min(stored) * 1000, "ms"])
        rows.append([f"{count} operations, {label}: re-import, nothing changed", min(again) * 1000, "ms"])
    return rows


def main() -> None:
    title = f"OpenAPI import (generated OpenAPI 3.1 document, best of {ROUNDS})"
    report(import_rows(), title, ["case", "time", "unit"])


if __name__ == "__main__":
    main()
