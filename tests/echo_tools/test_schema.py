"""JSON Schema handling: meta-checks, offline references, compiled validators, argument normalising."""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from echo_tools.errors import ToolRegistrationError
from echo_tools.models import ToolDef
from echo_tools.schema import SchemaValidator, check_schema, compiled, format_path, normalize_args
from tests.conftest import Corpus, corpus_cases


@pytest.fixture
def calculator(corpus: Corpus) -> ToolDef:
    return ToolDef.model_validate(json.loads((corpus / "tools" / "tool_calculator.json").read_text()))


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on 127.0.0.1 that serves a schema and records every request it gets."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = b'{"type": "string"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.mark.parametrize(("corpus", "stem"), corpus_cases(lambda c: c.manifests), indirect=["corpus"])
def test_every_corpus_schema_passes_the_meta_check(corpus: Corpus, stem: str) -> None:
    data = json.loads((corpus / "manifests" / f"{stem}.json").read_text())
    check_schema(data["input_schema"], field="input_schema", tool_id=data["tool_id"])
    check_schema(data["output_schema"], field="output_schema", tool_id=data["tool_id"])


def test_an_empty_schema_accepts_anything() -> None:
    check_schema({}, field="input_schema")
    validator = SchemaValidator({})
    assert validator.accepts_anything and validator.is_valid(object()) and validator.errors([1]) == []


@pytest.mark.parametrize(
    ("schema", "where", "value"),
    [
        ({"type": "strin"}, "at type", "'strin'"),
        ({"type": "object", "properties": {"a": {"type": 5}}}, "at properties/a/type", "5"),
        ({"type": "object", "required": "a"}, "at required", "'a'"),
        ({"pattern": "("}, "at pattern", "'('"),
    ],
)
def test_an_invalid_schema_is_refused_naming_the_field_path_and_value(
    schema: dict, where: str, value: str
) -> None:
    with pytest.raises(ToolRegistrationError) as caught:
        check_schema(schema, field="output_schema", tool_id="tool_x")
    message = str(caught.value)
    assert message.startswith("Tool 'tool_x': output_schema is not a valid JSON Schema")
    assert where in message and value in message
    assert caught.value.field == "output_schema" and caught.value.tool_id == "tool_x"


def test_a_schema_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(
        ToolRegistrationError, match=r"input_schema must be a JSON object .*got list: \['a'\]"
    ):
        check_schema(["a"], field="input_schema")


def test_a_dangling_local_reference_is_refused() -> None:
    with pytest.raises(ToolRegistrationError, match="input_schema cannot be compiled: .*/definitions/nope"):
        check_schema({"$ref": "#/definitions/nope"}, field="input_schema")


def test_a_remote_reference_is_refused_without_any_request(schema_server: tuple[str, list[str]]) -> None:
    base, hits = schema_server
    schema = {"type": "object", "properties": {"a": {"$ref": f"{base}/evil.json"}}}
    with pytest.raises(ToolRegistrationError, match="Retrieval is disabled"):
        check_schema(schema, field="input_schema", tool_id="tool_x")
    assert hits == []


def test_a_file_reference_is_refused_without_reading_the_file(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"type": "string"}')
    with pytest.raises(ToolRegistrationError, match="Retrieval is disabled"):
        check_schema({"$ref": secret.as_uri()}, field="input_schema")


def test_local_references_and_definitions_work() -> None:
    schema = {
        "type": "object",
        "properties": {"when": {"$ref": "#/$defs/date"}},
        "$defs": {"date": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}-[0-9]{2}$"}},
    }
    check_schema(schema, field="input_schema")
    validator = SchemaValidator(schema)
    assert validator.is_valid({"when": "2026-01-02"}) and not validator.is_valid({"when": "soon"})


def test_errors_name_the_path_and_the_bad_value(calculator: ToolDef) -> None:
    errors = compiled(calculator, "input").errors({"operation": "add", "values": [1, "x"]})
    assert errors == ['input.values[1]: "x" is not of type "number"']


def test_errors_of_a_missing_required_field_name_the_field(calculator: ToolDef) -> None:
    (error,) = compiled(calculator, "input").errors({"values": [1]})
    assert error.startswith("input: ") and '"operation" is a required property' in error


def test_errors_are_capped_at_five() -> None:
    validator = SchemaValidator({"type": "array", "items": {"type": "integer"}}, prefix="output")
    errors = validator.errors(["a"] * 20)
    assert len(errors) == 5 and errors[0].startswith("output[0]: ")


def test_validators_are_compiled_once_per_tool_object_and_fresh_for_a_new_object(calculator: ToolDef) -> None:
    first = compiled(calculator, "input")
    assert compiled(calculator, "input") is first
    assert compiled(calculator, "output") is not first
    other = ToolDef.model_validate(calculator.to_storage_dict())
    assert compiled(other, "input") is not first


def test_a_copy_with_a_new_schema_gets_a_validator_for_that_schema() -> None:
    tool = ToolDef(name="X", input_schema={"type": "object", "required": ["a"]})
    assert compiled(tool, "input").is_valid({}) is False
    for copy_of in (
        tool.model_copy(update={"input_schema": {"type": "object"}}),
        tool.model_copy(update={"input_schema": {"type": "object"}}, deep=True),
    ):
        assert compiled(copy_of, "input").is_valid({}) is True
    assert compiled(tool, "input").is_valid({}) is False
    tool.input_schema = {"type": "object"}
    assert compiled(tool, "input").is_valid({}) is True


def test_a_tool_with_compiled_validators_can_be_deep_copied(calculator: ToolDef) -> None:
    compiled(calculator, "input")
    clone = calculator.model_copy(deep=True)
    assert copy.deepcopy(calculator).to_storage_dict() == calculator.to_storage_dict()
    assert compiled(clone, "input").is_valid({"operation": "add"})


def test_a_stored_schema_that_cannot_compile_is_a_registration_error_at_first_use() -> None:
    tool = ToolDef(name="Broken", input_schema={"$ref": "#/nowhere"})  # loaded without a meta-check
    with pytest.raises(
        ToolRegistrationError, match="Tool 'tool_broken': input_schema cannot be compiled"
    ) as caught:
        compiled(tool, "input")
    assert caught.value.field == "input_schema"


def test_normalize_drops_none_for_optional_non_nullable_keys_and_fills_defaults(calculator: ToolDef) -> None:
    given = {"operation": "add", "values": [1, 2], "vectors": None, "matrices": None}
    out = normalize_args(calculator.input_schema, given)
    assert out == {"operation": "add", "values": [1, 2], "precision": 2, "rounding": "round"}
    assert given["vectors"] is None  # the caller's dict is untouched
    assert compiled(calculator, "input").is_valid(out)


def test_normalize_keeps_none_where_the_schema_allows_null_and_for_required_keys() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": ["string", "null"]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "c": {"type": "string"},
            "d": {},
        },
        "required": ["c"],
    }
    assert normalize_args(schema, {"a": None, "b": None, "c": None, "d": None}) == {
        "a": None,
        "b": None,
        "c": None,
        "d": None,
    }


def test_normalize_copies_defaults_so_callers_cannot_share_them() -> None:
    schema = {"type": "object", "properties": {"tags": {"type": "array", "default": []}}}
    first = normalize_args(schema, {})
    first["tags"].append("x")
    assert normalize_args(schema, {}) == {"tags": []}


def test_normalize_passes_non_dict_input_through() -> None:
    assert normalize_args({"type": "object", "properties": {}}, [1]) == [1]
    assert normalize_args({}, {"a": None}) == {"a": None}


def test_format_path_writes_indexes_and_keys() -> None:
    assert format_path(["values", 2, "x"]) == "values[2].x"
    assert format_path([]) == "(root)"
    assert format_path([0, "a"]) == "[0].a"


def test_scalar_properties_are_the_keys_typed_only_as_text_numbers_booleans_or_null() -> None:
    from echo_tools.schema import scalar_properties

    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "number"},
            "b": {"type": ["string", "null"]},
            "c": {"type": ["string", "array"]},
            "d": {"type": "object"},
            "e": {"enum": [1, 2]},
            "f": {},
        },
    }
    assert scalar_properties(schema) == {"a", "b"}
    assert scalar_properties({}) == frozenset() and scalar_properties({"properties": []}) == frozenset()


def test_a_validation_error_under_a_secret_key_names_the_field_but_not_the_value():
    from echo_tools.schema import SchemaValidator

    validator = SchemaValidator(
        {"type": "object", "properties": {"api_key": {"type": "string", "minLength": 40}}}
    )
    (message,) = validator.errors({"api_key": "sk-live-SECRET"})
    assert message.startswith("input.api_key:") and "minLength" in message
    assert "sk-live-SECRET" not in message


def test_an_error_about_an_object_holding_a_secret_does_not_quote_it():
    from echo_tools.schema import SchemaValidator

    validator = SchemaValidator({"type": "array"})
    (message,) = validator.errors({"password": "hunter2"})
    assert "hunter2" not in message and "redacted" in message
