"""Import an OpenAPI 3.0 / 3.1 or Swagger 2.0 document as `api` tools, one per operation.

`import_openapi(registry, spec, provider=...)` reads the document (a dict, a file, or a URL fetched under
the registry's egress policy with a size bound), resolves its local `$ref`s (remote ones are refused,
naming where), turns each operation's path, query and header parameters and JSON body into one input
schema, and registers the tools (`source: openapi`, tags `provider:<provider>` and `source:openapi`).
Importing again updates those tools and disables the ones whose operation disappeared. Form bodies
(urlencoded, multipart, Swagger `formData`) and common mistakes are handled by `echo_tools.openapi.wild`.
Operations that cannot be called faithfully (cookie parameters, unsupported styles) are skipped with the reason.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from echo_tools.errors import ToolReadOnlyError, ToolRegistrationError
from echo_tools.models import (
    SideEffect,
    ToolDef,
    ToolPermission,
    ToolSource,
    ToolStatus,
    ToolType,
    name_keys,
    slugify,
)
from echo_tools.openapi.document import (
    MAX_IMPORT_BYTES,
    MAX_IMPORT_TOOLS,
    OpenApiError,
    Resolver,
    SkipOperation,
    base_url_of,
    load_document,
    pointer,
    pointer_join,
    spec_version,
    without_read_only,
)
from echo_tools.openapi.wild import file_field, form_key, form_media, normalise_schema, swagger_form_body

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

logger = logging.getLogger("echo_tools.openapi")

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
CALLABLE_METHODS = frozenset({"get", "put", "post", "delete", "head", "patch", "trace"})
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})  # OpenAPI 3: these are ignored
PROVIDER_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,47}$")
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
class ImportReport:
    """What one import did: the tools registered or updated, operations skipped (pointer, reason),
    and ids of previously imported tools that were disabled because their operation is gone."""

    tools: list[ToolDef] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    # mistakes of the document that were normalised (`echo_tools.openapi.wild`): (pointer, what was done)
    warnings: list[tuple[str, str]] = field(default_factory=list)


# -- one operation ------------------------------------------------------------------------------------


@dataclass
class _Operation:
    method: str
    path: str
    where: str
    op: dict[str, Any]
    path_params: list[Any]
    op_id: str = ""
    original_id: str | None = None
    encoding: str | None = None  # a form body's media type (`echo_tools.openapi.wild`); None: JSON
    files: list[str] = field(default_factory=list)  # multipart fields sent as file parts


class _Converter:
    def __init__(self, document: dict[str, Any], version: str, resolver: Resolver) -> None:
        self.document = document
        self.version = version
        self.resolver = resolver
        self.swagger = version.startswith("2")
        self.warnings: list[tuple[str, str]] = []  # normalised mistakes (echo_tools.openapi.wild)

    def parameters(self, item: _Operation) -> list[tuple[dict[str, Any], str]]:
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

    def body(self, item: _Operation, params: list[tuple[dict[str, Any], str]]) -> tuple[Any, bool] | None:
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

    def input_schema(self, item: _Operation) -> tuple[dict[str, Any], dict[str, Any]]:
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


def _operations(document: dict[str, Any]) -> list[_Operation]:
    paths = document.get("paths")
    if not isinstance(paths, dict):
        raise OpenApiError(
            f"'paths' (JSON pointer '/paths') must be an object, got {type(paths).__name__}", field="/paths"
        )
    found: list[_Operation] = []
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
            found.append(_Operation(method, path, f"{where}/{method}", op, item.get("parameters", [])))
    _name_operations(found)
    return found


def _name_operations(operations: list[_Operation]) -> None:
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


# -- the import ---------------------------------------------------------------------------------------


def import_openapi(registry: ToolRegistry, spec: Any, **options: Any) -> list[ToolDef]:
    """Register one `api` tool per operation of an OpenAPI 3.0/3.1 or Swagger 2.0 document; returns the
    tools registered or updated, in document order.

    Takes the arguments of `import_openapi_report` (`provider`, `base_url`, `credential`, `operations`)
    and raises as it does; that one also says what was skipped and disabled.
    """
    return import_openapi_report(registry, spec, **options).tools


def import_openapi_report(
    registry: ToolRegistry,
    spec: Any,
    *,
    provider: str,
    base_url: str | None = None,
    credential: str | None = None,
    operations: Iterable[str] | None = None,
    owner: str | None = None,
) -> ImportReport:
    """`import_openapi`, also saying which operations were skipped and which old tools were disabled.

    Args:
        registry: where the tools are registered.
        spec: the document: a dict, a file path (JSON or YAML), or an http(s) URL (fetched under
            `registry.egress`, at most 10 MiB).
        provider: names the API (`shop`): ids are `<provider>_<operation>`, tags `provider:<provider>`.
        base_url: where calls go (default: `servers[0]`, or Swagger's `schemes`/`host`/`basePath`).
        credential: the name of a `registry.credentials` entry every call is sent with.
        operations: only these operations (operationId, snake_case id or tool id); default all.
        owner: the principal importing (`echo_tools.gate`), recorded on every tool (`ToolDef.owner`).

    Returns:
        The tools registered or updated, in document order (`tools`), the operations skipped with the
        reason (`skipped`), and the ids of previously imported tools disabled (`disabled`).

    Raises:
        OpenApiError: the document does not parse or validate (`field` is the JSON pointer), or an
            operation named in `operations` does not exist or cannot be imported.
    """
    if not isinstance(provider, str) or not PROVIDER_PATTERN.fullmatch(provider):
        raise OpenApiError(
            f"provider {provider!r} is invalid: it must match {PROVIDER_PATTERN.pattern}", field="provider"
        )
    if credential is not None:
        from echo_tools.credentials import check_name

        check_name(credential)
    document, fetched_from = load_document(spec, registry.egress)
    version = spec_version(document)
    resolver = Resolver(document)
    converter = _Converter(document, version, resolver)
    found = _operations(document)
    if base_url is None:
        base_url = base_url_of(document, version, fetched_from)
    if urlsplit(base_url).scheme not in ("http", "https") or "{" in base_url:
        raise OpenApiError(
            f"base_url {base_url!r} must be an http(s) URL without variables", field="base_url"
        )
    wanted = _selected(found, provider, operations)
    _check_operation_count(found, wanted)
    info: dict[str, Any] = document["info"] if isinstance(document.get("info"), dict) else {}
    report = ImportReport(warnings=converter.warnings)
    planned: list[ToolDef] = []
    for item in found:
        if wanted is not None and item.op_id not in wanted:
            continue
        try:
            planned.append(_tool(converter, item, provider, base_url.rstrip("/"), credential, info, version))
        except SkipOperation as exc:
            if wanted is not None:
                raise OpenApiError(
                    f"operation {item.op_id!r} cannot be imported: {exc}", field=item.where
                ) from exc
            report.skipped.append((item.where, str(exc)))
    if report.skipped:
        logger.warning(
            "OpenAPI import of %r: %d operations skipped (import_openapi_report lists why), first: %s",
            provider,
            len(report.skipped),
            report.skipped[0][1],
        )
    if owner is not None:
        planned = [tool.model_copy(update={"owner": owner}) for tool in planned]
    if report.warnings:
        logger.warning(
            "OpenAPI import of %r: %d mistakes of the document normalised (import_openapi_report lists "
            "them), first: %s: %s",
            provider,
            len(report.warnings),
            *report.warnings[0],
        )
    _unique_names(registry, planned)
    _check_stored_bytes(planned)
    # an unchanged operation is not checked and written again; the rest go in one batch, all or nothing
    batch = [tool for tool in planned if _differs(registry.get(tool.tool_id), tool)]
    present = {f"{provider}_{item.op_id}"[:128] for item in found}
    imported = {t.tool_id for t in planned}
    for old in registry.list_by_tags([f"provider:{provider}"]):
        if old.source != ToolSource.OPENAPI or old.tool_id in imported or old.status == ToolStatus.DISABLED:
            continue
        if wanted is not None and old.tool_id in present:
            continue  # not asked for this time, but still in the document
        batch.append(old.model_copy(update={"status": ToolStatus.DISABLED}))
        report.disabled.append(old.tool_id)
    if batch:
        try:
            registry.register_many(batch, replaces=_imported_from(provider))
        except ToolRegistrationError as exc:
            where = next(
                (t.metadata["openapi"]["pointer"] for t in planned if t.tool_id == exc.tool_id), None
            )
            at = f" (operation at {where})" if where else ""
            raise type(exc)(
                f"OpenAPI import of {provider!r} stored nothing: {exc.message}{at}",
                tool_id=exc.tool_id,
                field=exc.field,
            ) from exc
    report.tools = [registry.get(tool.tool_id) or tool for tool in planned]
    return report


def _refuse_framing_header(name: Any, where_in: str, where: str) -> None:
    """A header parameter may not choose the request's framing or routing (`Host`, `Content-Length`...)."""
    from echo_tools.egress import framing_header_refusal

    refusal = framing_header_refusal(name) if where_in == "header" else None
    if refusal:
        raise SkipOperation(f"parameter at {where}: {refusal}")


def _check_operation_count(found: list[_Operation], wanted: set[str] | None) -> None:
    """Refuse an import of more than `MAX_IMPORT_TOOLS` operations, before any is converted."""
    count = len(found) if wanted is None else len(wanted)
    if count > MAX_IMPORT_TOOLS:
        raise OpenApiError(
            f"the document has {count} operations; one import takes at most {MAX_IMPORT_TOOLS} "
            "(max_import_tools): choose some with operations=[...]; nothing was stored",
            field="/paths",
        )


def _check_stored_bytes(planned: list[ToolDef]) -> None:
    """Refuse an import whose tools would store more than `MAX_IMPORT_BYTES` in total."""
    total = 0
    for tool in planned:
        total += len(json.dumps(tool.to_storage_dict(), default=str))
        if total > MAX_IMPORT_BYTES:
            where = tool.metadata["openapi"]["pointer"]
            raise OpenApiError(
                f"the import would store more than {MAX_IMPORT_BYTES} bytes (max_import_bytes), passed at "
                f"operation {where}; nothing was stored",
                field=where,
            )


def _differs(current: ToolDef | None, tool: ToolDef) -> bool:
    return current is None or current.to_storage_dict() != tool.to_storage_dict()


def _imported_from(provider: str) -> Callable[[ToolDef], None]:
    """The guard of an import: it replaces only the tools an import of the same provider created."""

    def guard(current: ToolDef) -> None:
        if current.source != ToolSource.OPENAPI or current.metadata.get("provider") != provider:
            raise ToolReadOnlyError(
                f"Tool {current.tool_id!r} exists (source {current.source.value!r}"
                f"{_provider_of(current)}) and an import of provider {provider!r} may replace only the "
                "tools it created; import under another provider name",
                tool_id=current.tool_id,
                field="provider",
            )

    return guard


def _provider_of(tool: ToolDef) -> str:
    provider = tool.metadata.get("provider") if tool.source == ToolSource.OPENAPI else None
    return f", provider {provider!r}" if isinstance(provider, str) else ""


def _selected(found: list[_Operation], provider: str, operations: Iterable[str] | None) -> set[str] | None:
    if operations is None:
        return None
    if isinstance(operations, str):
        operations = [operations]
    wanted: set[str] = set()
    for ref in operations:
        match = next(
            (
                item
                for item in found
                if ref in (item.original_id, item.op_id, f"{provider}_{item.op_id}")
                or snake_case(ref) == item.op_id
            ),
            None,
        )
        if match is None:
            known = ", ".join(item.original_id or item.op_id for item in found[:20])
            raise OpenApiError(
                f"operation {ref!r} is not in the document (operations: {known})", field="operations"
            )
        wanted.add(match.op_id)
    return wanted


def _tool(
    converter: _Converter,
    item: _Operation,
    provider: str,
    base_url: str,
    credential: str | None,
    info: dict[str, Any],
    version: str,
) -> ToolDef:
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


def _unique_names(registry: ToolRegistry, tools: list[ToolDef]) -> None:
    """Rename tools whose summary-name is taken (here or in the registry) to `<summary> (<operation>)`."""
    taken: dict[str, str] = {}
    for tool in tools:
        candidates = [tool.name, f"{tool.name} ({tool.metadata['operation']})", tool.tool_id]
        for name in candidates:
            keys = name_keys(name[:200])
            owner = registry.resolve(name[:200])
            free_here = all(taken.get(k, tool.tool_id) == tool.tool_id for k in keys)
            ids_here = not any(k in taken.values() and k != tool.tool_id for k in keys)
            if free_here and ids_here and (owner is None or owner.tool_id == tool.tool_id):
                tool.name = name[:200]
                break
        for key in name_keys(tool.name):
            taken[key] = tool.tool_id


# -- the canvas's template tools ----------------------------------------------------------------------


def find_provider_tool(registry: ToolRegistry, provider: Any, action: Any) -> ToolDef | None:
    """The tool tagged `provider:<provider>` whose action matches: its operationId, operation id
    (snake_case), tool id, name, or MCP tool name, compared in snake_case (`createOrder` = `create_order`).
    An active tool wins over a deprecated or disabled one."""
    if not isinstance(provider, str) or not isinstance(action, str) or not provider or not action:
        return None
    wanted = snake_case(action)
    found: list[ToolDef] = []
    for tool in registry.list_by_tags([f"provider:{provider.strip().lower()}"]):
        names = (
            tool.metadata.get("operation_id"),
            tool.metadata.get("operation"),
            tool.tool_id,
            tool.name,
            tool.execution_config.get("tool") if tool.tool_type == ToolType.MCP else None,
        )
        if any(isinstance(n, str) and snake_case(n) in (wanted, f"{provider}_{wanted}") for n in names):
            found.append(tool)
    found.sort(key=lambda t: t.status != ToolStatus.ACTIVE)
    return found[0] if found else None


def template_tool(registry: ToolRegistry | None, config: Mapping[str, Any], report: Any) -> ToolDef | None:
    """The tool a canvas template entry `{provider, action, credentials}` binds, or None after reporting
    why through `report(level, field, message)` (level "error" or "warning")."""
    provider, action = config.get("provider"), config.get("action")
    if not isinstance(provider, str) or not provider.strip():
        report("error", "provider", f"a third-party tool needs config.provider, got {provider!r:.60}")
        return None
    if not isinstance(action, str) or not action.strip():
        report("error", "action", f"a third-party tool of provider {provider!r} needs config.action")
        return None
    tool = find_provider_tool(registry, provider, action) if registry is not None else None
    if tool is None:
        report(
            "error",
            "action",
            f"no tool tagged provider:{provider} has action {action!r}; import the provider's API first: "
            f"`echo-tools import openapi SPEC --provider {provider}`",
        )
        return None
    wanted = config.get("credentials")
    if isinstance(wanted, str) and wanted.strip():
        used = tool.execution_config.get("credential")
        if used != wanted.strip():
            report(
                "error",
                "credentials",
                f"tool {tool.tool_id!r} is called with credential {used!r}, not {wanted!r}; import the "
                f"provider with `--credential {wanted}` (a credential per canvas binding is not supported)",
            )
            return None
        assert registry is not None
        if wanted not in registry.credentials:
            report(
                "warning",
                "credentials",
                f"credential {wanted!r} does not exist yet; calls of {tool.tool_id!r} fail until "
                f"`echo-tools credentials set {wanted} ...` adds it",
            )
    return tool
