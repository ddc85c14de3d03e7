"""Reading an OpenAPI document: load it (dict, file or URL, size-bounded), resolve its local `$ref`s within
depth and size bounds, translate OpenAPI schema dialects to JSON Schema 2020-12, and find its version and
base URL. Every refusal names the JSON pointer of what is wrong (`OpenApiError.field`).

A document is bounded in total, not per operation: the bytes read (`MAX_SPEC_BYTES`), the nodes its
schemas expand to across the whole import once `$ref`s and YAML aliases are followed (`MAX_IMPORT_NODES`),
the bytes an import stores (`MAX_IMPORT_BYTES`) and the tools it makes (`MAX_IMPORT_TOOLS`).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from echo_tools.errors import ToolRegistrationError

if TYPE_CHECKING:
    from echo_tools.egress import EgressPolicy

MAX_SPEC_BYTES = 10 * 1024 * 1024
MAX_REF_DEPTH = 32
MAX_SCHEMA_NODES = 20_000
MAX_SCHEMA_DEPTH = 64
MAX_REDIRECTS = 5
MAX_IMPORT_NODES = 200_000  # schema nodes after $ref expansion, and YAML alias expansion, per import
MAX_IMPORT_BYTES = 8 * 1024 * 1024  # what one import stores (its tools as written to storage)
MAX_IMPORT_TOOLS = 2_000  # operations one import turns into tools
OPENAPI_ONLY_KEYS = frozenset({"discriminator", "xml", "externalDocs", "example", "nullable"})


class OpenApiError(ToolRegistrationError):
    """An OpenAPI document cannot be imported; `field` is the JSON pointer of the offending part."""


class SkipOperation(Exception):
    """One operation cannot be imported (the reason is the message); the others can."""


def pointer(*parts: Any) -> str:
    """The JSON pointer of `parts` (`/paths/~1items~1{id}/get`)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


# -- reading the document -----------------------------------------------------------------------------


def load_document(spec: Any, egress: EgressPolicy | None = None) -> tuple[dict[str, Any], str | None]:
    """The document as a dict and, when it came from a URL, that URL (relative server URLs resolve
    against it).

    Raises:
        OpenApiError: unreadable, too large, not JSON/YAML, not an object, or a URL refused by the policy.
    """
    if isinstance(spec, Mapping):
        return copy.deepcopy(dict(spec)), None
    if isinstance(spec, (str, Path)) and str(spec).lower().startswith(("http://", "https://")):
        text, url = _fetch(str(spec), egress)
        return _parse(text, url), url
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        try:
            with path.open("rb") as fh:
                raw = fh.read(MAX_SPEC_BYTES + 1)
        except OSError as exc:
            raise OpenApiError(
                f"OpenAPI document {str(path)!r} cannot be read: {exc.strerror or exc}", field="spec"
            ) from exc
        if len(raw) > MAX_SPEC_BYTES:
            raise OpenApiError(
                f"OpenAPI document {str(path)!r} is larger than {MAX_SPEC_BYTES} bytes", field="spec"
            )
        return _parse(raw, str(path)), None
    raise OpenApiError(
        f"spec must be a dict, a file path or an http(s) URL, got {type(spec).__name__}", field="spec"
    )


def _fetch(url: str, egress: EgressPolicy | None) -> tuple[bytes, str]:
    """The document's bytes and final URL, fetched through the egress client (called from sync code: a
    running loop in this thread hands the fetch to a thread of its own)."""
    import asyncio
    import concurrent.futures

    from echo_tools.egress import EgressPolicy
    from echo_tools.runtime import loop_running

    policy = egress or EgressPolicy()
    if not loop_running():
        return asyncio.run(_fetch_async(url, policy))
    with concurrent.futures.ThreadPoolExecutor(1) as worker:
        return worker.submit(asyncio.run, _fetch_async(url, policy)).result()


async def _fetch_async(url: str, policy: EgressPolicy) -> tuple[bytes, str]:
    import httpx

    from echo_tools.bounded_body import UndecodableBodyError
    from echo_tools.bounded_read import read_bounded
    from echo_tools.egress import egress_client
    from echo_tools.errors import EgressDeniedError

    async with egress_client(policy, max_body_bytes=MAX_SPEC_BYTES, timeout=30.0) as client:
        for _ in range(MAX_REDIRECTS + 1):
            try:
                async with client.stream("GET", url, headers={"Accept": "application/json, */*"}) as response:
                    location = response.headers.get("location")
                    if response.status_code in (301, 302, 303, 307, 308) and location:
                        url = urljoin(url, location)
                        continue
                    if response.status_code != 200:
                        raise OpenApiError(
                            f"OpenAPI document {url!r} answered HTTP {response.status_code}", field="spec"
                        )
                    body, cut = await read_bounded(response, MAX_SPEC_BYTES)
            except EgressDeniedError as exc:
                raise OpenApiError(f"OpenAPI document URL refused: {exc.message}", field="spec") from exc
            except UndecodableBodyError as exc:
                raise OpenApiError(f"OpenAPI document {url!r}: {exc}", field="spec") from exc
            except httpx.HTTPError as exc:
                raise OpenApiError(
                    f"OpenAPI document {url!r} cannot be fetched: {type(exc).__name__}: {exc}", field="spec"
                ) from exc
            if cut:
                raise OpenApiError(
                    f"OpenAPI document {url!r} is larger than {MAX_SPEC_BYTES} bytes (decoded); reading "
                    "stopped",
                    field="spec",
                )
            return body, url
    raise OpenApiError(f"OpenAPI document {url!r}: more than {MAX_REDIRECTS} redirects", field="spec")


def _parse(raw: bytes, where: str) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise OpenApiError(f"OpenAPI document {where!r} is not UTF-8 text: {exc}", field="spec") from exc
    data: Any
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json.loads(text)
        except RecursionError as exc:
            raise OpenApiError(f"OpenAPI document {where!r} nests too deeply to read", field="spec") from exc
        except json.JSONDecodeError as exc:
            raise OpenApiError(
                f"OpenAPI document {where!r} does not parse as JSON: {exc.msg} at line {exc.lineno} "
                f"column {exc.colno}",
                field="spec",
            ) from exc
    else:
        try:
            import yaml
        except ImportError as exc:
            raise OpenApiError(
                f"OpenAPI document {where!r} is not JSON; reading YAML needs PyYAML (pip install pyyaml)",
                field="spec",
            ) from exc
        try:
            data = yaml.load(text, Loader=_counting_loader(yaml, where))  # a SafeLoader
        except RecursionError as exc:
            raise OpenApiError(f"OpenAPI document {where!r} nests too deeply to read", field="spec") from exc
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            at = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            raise OpenApiError(
                f"OpenAPI document {where!r} does not parse as YAML{at}", field="spec"
            ) from exc
    if not isinstance(data, dict):
        raise OpenApiError(
            f"OpenAPI document {where!r} must be an object at its root (JSON pointer ''), got "
            f"{type(data).__name__}",
            field="",
        )
    return data


def _counting_loader(yaml: Any, where: str) -> Any:
    """A `yaml.SafeLoader` that counts what each alias expands to, refusing a document whose aliases
    expand past `MAX_IMPORT_NODES` nodes (the billion laughs: a few hundred bytes, gigabytes once written)."""

    class CountingLoader(yaml.SafeLoader):  # type: ignore[misc,name-defined]
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.expanded = 0
            self.sizes: dict[int, int] = {}

        def compose_node(self, parent: Any, index: Any) -> Any:
            alias = self.check_event(yaml.AliasEvent)
            node = super().compose_node(parent, index)
            if alias:
                self.expanded += self.size(node)
                if self.expanded > MAX_IMPORT_NODES:
                    raise OpenApiError(
                        f"OpenAPI document {where!r} uses YAML aliases that expand to more than "
                        f"{MAX_IMPORT_NODES} nodes (max_import_nodes); aliases count in the import's total",
                        field="spec",
                    )
            return node

        def size(self, node: Any) -> int:
            known = self.sizes.get(id(node))
            if known is not None:
                return known
            self.sizes[id(node)] = MAX_IMPORT_NODES + 1  # an alias inside its own anchor: unbounded
            if isinstance(node, yaml.MappingNode):
                total = 1 + sum(self.size(k) + self.size(v) for k, v in node.value)
            elif isinstance(node, yaml.SequenceNode):
                total = 1 + sum(self.size(v) for v in node.value)
            else:
                total = 1
            self.sizes[id(node)] = total
            return total

    return CountingLoader


# -- references and schemas ---------------------------------------------------------------------------


class Resolver:
    """Local `$ref` resolution with a depth and size bound; remote references are refused."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.nodes = 0
        self.total = 0  # across the whole import (`nodes` is per operation)
        self.depth = 0

    def lookup(self, ref: Any, where: str) -> tuple[Any, str]:
        if not isinstance(ref, str):
            raise OpenApiError(f"$ref at {where} must be a string, got {ref!r:.60}", field=where)
        if not ref.startswith("#"):
            raise OpenApiError(
                f"$ref {ref!r} at {where} points to another document; only references inside this "
                "document are resolved (inline or bundle the referenced document first)",
                field=where,
            )
        target: Any = self.document
        path = ref[1:]
        if path and not path.startswith("/"):
            raise OpenApiError(f"$ref {ref!r} at {where} is not a JSON pointer", field=where)
        for part in path.split("/")[1:] if path else []:
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and key in target:
                target = target[key]
            elif isinstance(target, list) and key.isdigit() and int(key) < len(target):
                target = target[int(key)]
            else:
                raise OpenApiError(f"$ref {ref!r} at {where} points to nothing in the document", field=where)
        return target, ref[1:]

    def deref(self, node: Any, where: str) -> tuple[Any, str]:
        """Follow `$ref`s of an object (parameter, request body) to the object itself."""
        for _ in range(MAX_REF_DEPTH):
            if not (isinstance(node, dict) and "$ref" in node):
                return node, where
            node, where = self.lookup(node["$ref"], where + "/$ref")
        raise OpenApiError(f"$ref chain at {where} is longer than {MAX_REF_DEPTH}", field=where)

    def schema(self, node: Any, where: str, *, version: str, stack: tuple[str, ...] = ()) -> Any:
        """`_schema` with a nesting bound: deeper schemas would exhaust the interpreter's stack."""
        self.depth += 1
        try:
            if self.depth > MAX_SCHEMA_DEPTH:
                raise SkipOperation(f"the schema at {where} nests deeper than {MAX_SCHEMA_DEPTH} levels")
            return self._schema(node, where, version=version, stack=stack)
        finally:
            self.depth -= 1

    def _schema(self, node: Any, where: str, *, version: str, stack: tuple[str, ...] = ()) -> Any:
        """A JSON Schema (2020-12) with every local `$ref` inlined and OpenAPI-only keywords translated;
        a recursive reference becomes `{}` (any value) where it recurs."""
        self.nodes += 1
        self.total += 1
        if self.total > MAX_IMPORT_NODES:
            raise OpenApiError(
                f"the schemas of this import expand to more than {MAX_IMPORT_NODES} nodes in total once "
                f"$refs are followed (max_import_nodes), at {where}; nothing was stored",
                field=where,
            )
        if self.nodes > MAX_SCHEMA_NODES:  # per operation (see _Converter.input_schema)
            raise SkipOperation(
                f"the schemas of this operation expand past {MAX_SCHEMA_NODES} nodes at {where}"
            )
        if len(stack) > MAX_REF_DEPTH:
            raise OpenApiError(f"schema at {where} nests more than {MAX_REF_DEPTH} references", field=where)
        if isinstance(node, list):
            return [self.schema(v, f"{where}/{i}", version=version, stack=stack) for i, v in enumerate(node)]
        if not isinstance(node, dict):
            return node
        if "$ref" in node:
            ref = node["$ref"]
            if isinstance(ref, str) and ref in stack:
                return {"description": f"(recursive: {ref})"}
            target, target_where = self.lookup(ref, where + "/$ref")
            inlined = self.schema(target, target_where, version=version, stack=(*stack, ref))
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if siblings and version.startswith("3.1") and isinstance(inlined, dict):
                extra = self.schema(siblings, where, version=version, stack=stack)
                return {**inlined, **extra}
            return inlined
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key.startswith("x-") or key in OPENAPI_ONLY_KEYS:
                continue
            if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
                out[key] = {
                    k: self.schema(v, pointer_join(where, key, k), version=version, stack=stack)
                    for k, v in value.items()
                }
            elif isinstance(value, (dict, list)) and key not in ("enum", "const", "default", "examples"):
                out[key] = self.schema(value, pointer_join(where, key), version=version, stack=stack)
            else:
                out[key] = value
        if not version.startswith("3.1"):
            _translate_draft4(out, node)
        return out


def pointer_join(base: str, *parts: Any) -> str:
    return base + pointer(*parts)


def _translate_draft4(out: dict[str, Any], node: dict[str, Any]) -> None:
    """OpenAPI 3.0 / Swagger 2.0 schema keywords that mean something else in JSON Schema 2020-12."""
    if node.get("nullable") is True and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
        if "enum" in out and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    for bound, flag in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if isinstance(out.get(flag), bool):
            if out[flag] and bound in out:
                out[flag] = out.pop(bound)
            else:
                del out[flag]


def without_read_only(schema: Any) -> Any:
    """The input form of a schema: `readOnly` properties are the server's to set, so they are left out."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    props = out.get("properties")
    if isinstance(props, dict):
        kept = {
            k: without_read_only(v)
            for k, v in props.items()
            if not (isinstance(v, dict) and v.get("readOnly") is True)
        }
        out["properties"] = kept
        if isinstance(out.get("required"), list):
            out["required"] = [r for r in out["required"] if r in kept]
            if not out["required"]:
                del out["required"]
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = without_read_only(out[key])
    for key in ("allOf", "anyOf", "oneOf"):
        if isinstance(out.get(key), list):
            out[key] = [without_read_only(v) for v in out[key]]
    return out


# -- the document -------------------------------------------------------------------------------------


def spec_version(document: dict[str, Any]) -> str:
    if "openapi" in document:
        version = str(document["openapi"])
        if not re.match(r"^3\.[01](\.\d+)?", version):
            raise OpenApiError(
                f"openapi version {version!r} is not supported (3.0 and 3.1 are, and Swagger 2.0)",
                field="/openapi",
            )
        return version
    if "swagger" in document:
        if str(document["swagger"]) != "2.0":
            raise OpenApiError(
                f"swagger version {document['swagger']!r} is not supported (only 2.0)", field="/swagger"
            )
        return "2.0"
    raise OpenApiError(
        "the document has neither 'openapi' (3.0, 3.1) nor 'swagger' (2.0) at its root (JSON pointer "
        "'/openapi'); it is not an OpenAPI document",
        field="/openapi",
    )


def base_url_of(document: dict[str, Any], version: str, fetched_from: str | None) -> str:
    """`servers[0].url` (its variables at their defaults), or Swagger's `schemes`/`host`/`basePath`."""
    if version.startswith("2"):
        host = document.get("host")
        base_path = str(document.get("basePath") or "")
        if not host:
            if fetched_from:
                return urljoin(fetched_from, base_path or "/")
            raise OpenApiError(
                "the document has no 'host' (JSON pointer '/host'); give base_url (--base-url)", field="/host"
            )
        schemes = document.get("schemes") or ["https"]
        scheme = "https" if "https" in schemes else str(schemes[0])
        return f"{scheme}://{host}{base_path}"
    servers = document.get("servers") or []
    if not isinstance(servers, list) or not servers or not isinstance(servers[0], dict):
        if fetched_from:
            return urljoin(fetched_from, "/")
        raise OpenApiError(
            "the document lists no servers (JSON pointer '/servers'); give base_url (--base-url)",
            field="/servers",
        )
    server = servers[0]
    url = str(server.get("url", ""))
    for name, var in (server.get("variables") or {}).items():
        if isinstance(var, dict) and "default" in var:
            url = url.replace("{" + name + "}", str(var["default"]))
    if "{" in url:
        raise OpenApiError(
            f"server URL {url!r} (JSON pointer '/servers/0/url') has a variable without a default; give "
            "base_url (--base-url)",
            field="/servers/0/url",
        )
    if not urlsplit(url).scheme:
        if not fetched_from:
            raise OpenApiError(
                f"server URL {url!r} (JSON pointer '/servers/0/url') is relative; give base_url (--base-url)",
                field="/servers/0/url",
            )
        url = urljoin(fetched_from, url)
    return url
