"""One operation of an OpenAPI / Swagger document as one `api` tool: its path, query and header parameters
and its body as one input schema, where each argument goes on the wire, and the `ToolDef` that calls it.

`operations_of(document)` lists a document's operations with stable snake_case ids; a `Converter` reads
their parameters and bodies (form bodies and the document's mistakes through `echo_tools.openapi.wild`);
`operation_tool` builds the tool, or raises `SkipOperation` saying why the operation cannot be called
faithfully. The batch (selection, limits, storing) is `echo_tools.openapi.importer`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from echo_tools.models import SideEffect, ToolDef, ToolPermission, ToolSource, ToolStatus, ToolType, slugify
from echo_tools.openapi.document import (
    OpenApiError,
    Resolver,
    SkipOperation,
    pointer,
    pointer_join,
    without_read_only,
)
from echo_tools.openapi.wild import file_field, form_key, form_media, normalise_schema, swagger_form_body

__all__ = [
    "CALLABLE_METHODS",
    "METHODS",
    "Converter",
    "Operation",
    "operation_tool",
    "operations_of",
    "snake_case",
]

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
CALLABLE_METHODS = frozenset({"get", "put", "post", "delete", "head", "patch", "trace"})
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})  # OpenAPI 3: these are ignored
QUERY_STYLES = frozenset({"form", "spaceDelimited", "pipeDelimited", "deepObject"})
COLLECTION_FORMATS = {"csv": ("form", False), "multi": ("form", True), "ssv": ("spaceDelimited", False)}
COLLECTION_FORMATS["pipes"] = ("pipeDelimited", False)
SWAGGER_SCHEMA_KEYS = (
    "type format items enum default minimum maximum exclusiveMinimum exclusiveMaximum pattern minLength "
    "maxLength minItems maxItems uniqueItems multipleOf description"
).split()


def snake_case(text: str) -> str:
    """`getItem` -> `get_item`, `List-Orders v2` -> `list_orders_v2`."""
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", text)
    return slugify(text)


@dataclass
class Operation:
    """One operation of the document: its method, path and JSON pointer (`where`), the operation object
    (`op`), the path item's parameters, and what the import decides for it (`op_id`, a form body)."""

    method: str
    path: str
    where: str
    op: dict[str, Any]
    path_params: list[Any]
    op_id: str = ""
    original_id: str | None = None
    encoding: str | None = None  # a form body's media type (`echo_tools.openapi.wild`); None: JSON
    files: list[str] = field(default_factory=list)  # multipart fields sent as file parts


class Converter:
    """Reads operations of one document (version, `$ref` resolver) into input schemas and argument maps,
    collecting the document's mistakes it normalised (`warnings`)."""

    def __init__(self, document: dict[str, Any], version: str, resolver: Resolver) -> None:
        self.document = document
        self.version = version
        self.resolver = resolver
        self.swagger = version.startswith("2")
        self.warnings: list[tuple[str, str]] = []  # normalised mistakes (echo_tools.openapi.wild)

    def parameters(self, item: Operation) -> list[tuple[dict[str, Any], str]]:
        """Path-level and operation-level parameters (the operation's win), each with its pointer."""
        merged: dict[tuple[str, str], tuple[dict[str, Any], str]] = {}
        sources = (
            (item.path_params, pointer("paths", item.path, "parameters")),
            (item.op.get("parameters", []), item.where + "/parameters"),
        )
        for params, where in sources:
            if not isinstance(params, list):
                raise OpenApiError(f"parameters at {where} must be a list", field=where)
            for i, raw in enumerate(params):
                param, param_where = self.resolver.deref(raw, f"{where}/{i}")
                if not isinstance(param, dict) or not isinstance(param.get("name"), str):
                    raise OpenApiError(f"parameter at {param_where} needs a string 'name'", field=param_where)
                if param.get("in") not in ("path", "query", "header", "cookie", "body", "formData"):
                    raise OpenApiError(
                        f"parameter {param['name']!r} at {param_where} has 'in' {param.get('in')!r}; expected "
                        "path, query, header or cookie",
                        field=param_where + "/in",
                    )
                merged[(param["name"], param["in"])] = (param, param_where)
        return list(merged.values())

    def param_schema(self, param: dict[str, Any], where: str) -> Any:
        if self.swagger and param["in"] != "body":
            raw = {k: param[k] for k in SWAGGER_SCHEMA_KEYS if k in param}
            if "type" not in raw and "enum" not in raw:  # a wild mistake: parameters travel as text
                raw["type"] = "string"
                self.warnings.append((where, f"parameter {param['name']!r} has no type; read as 'string'"))
            if raw.get("type") == "file" and param["in"] == "formData":
                return file_field(param.get("description"))
            if raw.get("type") == "file":
                raise SkipOperation(
                    f"parameter {param['name']!r} at {where} is a file upload, which is not supported"
                )
            return self.resolver.schema(raw, where, version=self.version)
        if "content" in param:
            raise SkipOperation(
                f"parameter {param['name']!r} at {where} uses 'content' serialisation, which is not supported"
            )
        return self.resolver.schema(param.get("schema", {}), where + "/schema", version=self.version)

    def style(self, param: dict[str, Any], where: str) -> dict[str, Any]:
        """How a parameter is serialised: `{"style", "explode"}`, or `SkipOperation` naming an unsupported one."""
        where_in = param["in"]
        if self.swagger:
            fmt = param.get("collectionFormat", "csv")
            if fmt not in COLLECTION_FORMATS or (fmt == "multi" and where_in != "query"):
                raise SkipOperation(
                    f"parameter {param['name']!r} at {where} has collectionFormat {fmt!r}, which is not "
                    f"supported in {where_in} (supported: csv, ssv, pipes, and multi in the query)"
                )
            style, explode = COLLECTION_FORMATS[fmt]
            return {"style": "simple" if where_in != "query" else style, "explode": explode}
        default = "form" if where_in == "query" else "simple"
        style = param.get("style", default)
        allowed = QUERY_STYLES if where_in == "query" else frozenset({"simple"})
        if style not in allowed:
            raise SkipOperation(
                f"parameter {param['name']!r} at {where} has style {style!r}, which is not supported in "
                f"{where_in} (supported: {', '.join(sorted(allowed))})"
            )
        return {"style": style, "explode": bool(param.get("explode", style == "form"))}

    def body(self, item: Operation, params: list[tuple[dict[str, Any], str]]) -> tuple[Any, bool] | None:
        """The JSON body schema and whether it is required, or None when the operation takes no body."""
        if self.swagger:
            forms = [(p, w) for p, w in params if p["in"] == "formData"]
            if forms:
                return swagger_form_body(self, item, forms)
            bodies = [(p, w) for p, w in params if p["in"] == "body"]
            if not bodies:
                return None
            param, where = bodies[0]
            consumes = item.op.get("consumes", self.document.get("consumes")) or ["application/json"]
            if not any(_is_json(c) for c in consumes):
                raise SkipOperation(
                    f"operation at {item.where} consumes {consumes!r}; only JSON bodies are supported"
                )
            schema = self.resolver.schema(param.get("schema", {}), where + "/schema", version=self.version)
            return schema, bool(param.get("required"))
        raw = item.op.get("requestBody")
        if raw is None:
            return None
        body, where = self.resolver.deref(raw, item.where + "/requestBody")
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, dict):
            raise OpenApiError(f"requestBody at {where} needs a 'content' object", field=where + "/content")
        media = next((m for m in content if _is_json(m)), None)
        if media is None and form_media(content) is not None:
            item.encoding = form_media(content)
            media = form_key(content, item.encoding or "")
        if media is None:
            if not content:
                return None
            raise SkipOperation(
                f"operation at {item.where} sends {sorted(content)!r}; only JSON request bodies are supported"
            )
        entry = content[media] if isinstance(content[media], dict) else {}
        schema = self.resolver.schema(
            entry.get("schema", {}), pointer_join(where, "content", media, "schema"), version=self.version
        )
        return schema, bool(body.get("required"))

    def input_schema(self, item: Operation) -> tuple[dict[str, Any], dict[str, Any]]:
        """`(input_schema, arguments)` of an operation (see `echo_tools.openapi.request`)."""
        self.resolver.nodes = 0
        params = self.parameters(item)
        properties: dict[str, Any] = {}
        required: list[str] = []
        arguments: dict[str, Any] = {}
        for param, where in params:
            name, where_in = param["name"], param["in"]
            if where_in in ("body", "formData"):
                continue
            if where_in == "cookie":
                raise SkipOperation(
                    f"parameter {name!r} at {where} is a cookie parameter, which is not supported"
                )
            if where_in == "header" and name.lower() in IGNORED_HEADERS:
                continue
            _refuse_framing_header(name, where_in, where)
            if name in properties:
                raise SkipOperation(
                    f"parameter name {name!r} at {where} is used twice (in {where_in} and another place)"
                )
            schema = self.param_schema(param, where)
            if isinstance(schema, dict) and param.get("description") and "description" not in schema:
                schema = {**schema, "description": str(param["description"])[:1000]}
            properties[name] = without_read_only(schema)
            arguments[name] = {"in": where_in, "name": name, **self.style(param, where)}
            if param.get("required") or where_in == "path":
                required.append(name)
        for name in re.findall(r"\{([^{}]+)\}", item.path):
            if arguments.get(name, {}).get("in") != "path":
                if name in properties:
                    raise SkipOperation(
                        f"path placeholder {{{name}}} at {item.where} clashes with a {name!r} parameter"
                    )
                # undeclared (the document is sloppy, as httpbin's is): a required string is what it must be
                properties[name] = {"type": "string", "description": "path parameter"}
                arguments[name] = {"in": "path", "name": name, "style": "simple", "explode": False}
                required.append(name)
        body = self.body(item, params)
        if body is not None:
            schema, body_required = body
            schema = without_read_only(schema)
            fields = schema.get("properties") if isinstance(schema, dict) else None
            simple = (
                isinstance(fields, dict)
                and schema.get("type", "object") == "object"
                and not any(k in schema for k in ("allOf", "anyOf", "oneOf", "not", "$ref"))
            )
            if simple and fields and not set(fields) & set(properties):
                properties.update(fields)
                if body_required:
                    required.extend(r for r in schema.get("required", []) if r in fields)
            else:
                key = "body" if "body" not in properties else "request_body"
                properties[key] = schema
                arguments[key] = {"in": "body", "name": key}
                if body_required:
                    required.append(key)
        input_schema: dict[str, Any] = {
            "type": "object",
            "properties": properties,
            "additionalProperties": False,
        }
        if required:
            input_schema["required"] = list(dict.fromkeys(required))
        return normalise_schema(input_schema, item.where, self.warnings), arguments


def _is_json(media: Any) -> bool:
    media = str(media).split(";")[0].strip().lower()
    return media in ("application/json", "*/*", "application/*") or media.endswith("+json")


def operations_of(document: dict[str, Any]) -> list[Operation]:
    """Every operation of `document`'s `paths`, in document order, each with its unique snake_case id."""
    paths = document.get("paths")
    if not isinstance(paths, dict):
        raise OpenApiError(
            f"'paths' (JSON pointer '/paths') must be an object, got {type(paths).__name__}", field="/paths"
        )
    found: list[Operation] = []
    for path, item in paths.items():
        where = pointer("paths", path)
        if not isinstance(path, str) or not path.startswith("/"):
            raise OpenApiError(f"path {path!r} at {where} must start with '/'", field=where)
        if not isinstance(item, dict):
            raise OpenApiError(f"path item at {where} must be an object", field=where)
        if "$ref" in item:
            raise OpenApiError(
                f"path item $ref at {where} is not supported; inline it", field=where + "/$ref"
            )
        for method in METHODS:
            if method not in item:
                continue
            op = item[method]
            if not isinstance(op, dict):
                raise OpenApiError(
                    f"operation at {where}/{method} must be an object", field=f"{where}/{method}"
                )
            found.append(Operation(method, path, f"{where}/{method}", op, item.get("parameters", [])))
    _name_operations(found)
    return found


def _name_operations(operations: list[Operation]) -> None:
    """Each operation's snake_case id: its operationId, else `<method>_<path slug>`; unique, stable."""
    taken: set[str] = set()
    for item in operations:
        raw = item.op.get("operationId")
        if raw is not None and not isinstance(raw, str):
            raise OpenApiError(
                f"operationId at {item.where}/operationId must be a string, got {raw!r:.60}",
                field=item.where + "/operationId",
            )
        item.original_id = raw
        base = snake_case(raw) if raw else f"{item.method}_{slugify(item.path) or 'root'}"
        candidate, n = base, 2
        while candidate in taken:
            candidate, n = f"{base}_{n}", n + 1
        taken.add(candidate)
        item.op_id = candidate


def _refuse_framing_header(name: Any, where_in: str, where: str) -> None:
    """A header parameter may not choose the request's framing or routing (`Host`, `Content-Length`...)."""
    from echo_tools.egress import framing_header_refusal

    refusal = framing_header_refusal(name) if where_in == "header" else None
    if refusal:
        raise SkipOperation(f"parameter at {where}: {refusal}")


def operation_tool(
    converter: Converter,
    item: Operation,
    provider: str,
    base_url: str,
    credential: str | None,
    info: dict[str, Any],
    version: str,
) -> ToolDef:
    """The `api` tool `<provider>_<op_id>` calling `item` at `base_url` (with `credential` when given).

    Raises:
        SkipOperation: the operation cannot be called faithfully (its method, a parameter, its schema).
    """
    import jsonschema_rs

    if item.method not in CALLABLE_METHODS:
        raise SkipOperation(
            f"operation at {item.where} uses method {item.method.upper()}, which api tools cannot send"
        )
    input_schema, arguments = converter.input_schema(item)
    tool_id = f"{provider}_{item.op_id}"[:128]
    try:
        # the fast meta-check: a bad schema skips this operation instead of failing the whole import
        jsonschema_rs.meta.validate(input_schema)
    except jsonschema_rs.ValidationError as exc:
        at = "/".join(str(p) for p in exc.instance_path)
        raise SkipOperation(
            f"operation at {item.where}: its input schema is invalid at {at}: {exc.message}"
        ) from exc
    op = item.op
    summary = " ".join(str(op.get("summary") or "").split())[:120]
    text = " ".join(str(op.get("description") or "").split())[:1500]
    description = "\n\n".join(p for p in (summary, text, f"{item.method.upper()} {item.path}") if p)
    config: dict[str, Any] = {
        "url": base_url + item.path,
        "method": item.method.upper(),
        "arguments": arguments,
    }
    if credential:
        config["credential"] = credential
    if item.encoding:  # a form body (echo_tools.openapi.request encodes it)
        config["body_encoding"] = item.encoding
        if item.files:
            config["files"] = list(item.files)
    method = item.method.upper()
    return ToolDef(
        tool_id=tool_id,
        name=summary or item.op_id,
        description=description,
        tool_type=ToolType.API,
        input_schema=input_schema,
        execution_config=config,
        version=str(info.get("version") or "1.0")[:40],
        tags=[f"provider:{provider}", "source:openapi"],
        status=ToolStatus.DEPRECATED if op.get("deprecated") is True else ToolStatus.ACTIVE,
        side_effect=SideEffect.IDEMPOTENT if method in ("GET", "HEAD", "TRACE") else SideEffect.EXTERNAL,
        permissions=[ToolPermission.NET_OUTBOUND],
        source=ToolSource.OPENAPI,
        metadata={
            "provider": provider,
            "operation": item.op_id,
            "operation_id": item.original_id,
            "method": method,
            "path": item.path,
            "credential": credential,
            "openapi": {"version": version, "title": info.get("title"), "pointer": item.where},
        },
    )
