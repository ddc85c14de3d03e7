"""OpenAPI documents as they are found in the wild: common mistakes normalised (with a warning), and form
bodies (`application/x-www-form-urlencoded`, `multipart/form-data`, Swagger 2.0 `formData`).

`normalise_schema` fixes what generators and hand-written documents get wrong and a JSON Schema validator
refuses: `type: int` / `str` / `bool` / `float` / `dict` / `list` (Python's names), and `required: true`
on a property (OpenAPI 2's parameter habit) instead of the object's `required` list. Each fix is a
warning naming where it was made. Nothing here fetches or resolves: it works on resolved schemas.
"""

from __future__ import annotations

from typing import Any

FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
TYPE_ALIASES = {
    "int": "integer", "long": "integer", "int32": "integer", "int64": "integer", "str": "string",
    "text": "string", "bool": "boolean", "float": "number", "double": "number", "decimal": "number",
    "dict": "object", "map": "object", "list": "array",
}  # fmt: skip
JSON_TYPES = frozenset({"string", "integer", "number", "boolean", "object", "array", "null"})
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")


def normalise_schema(schema: Any, where: str, warnings: list[tuple[str, str]]) -> Any:
    """`schema` with wild-document mistakes fixed; each fix appended to `warnings` as `(where, what)`."""
    if isinstance(schema, list):
        return [normalise_schema(s, f"{where}/{i}", warnings) for i, s in enumerate(schema)]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    kind = out.get("type")
    if isinstance(kind, str) and kind not in JSON_TYPES and kind.lower() in TYPE_ALIASES:
        out["type"] = TYPE_ALIASES[kind.lower()]
        warnings.append(
            (f"{where}/type", f"type {kind!r} is not a JSON Schema type; read as {out['type']!r}")
        )
    for key in _SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = normalise_schema(out[key], f"{where}/{key}", warnings)
    for key in ("items", "not", "additionalProperties", "if", "then", "else"):
        if isinstance(out.get(key), (dict, list)):
            out[key] = normalise_schema(out[key], f"{where}/{key}", warnings)
    for key in _SCHEMA_MAPS:
        members = out.get(key)
        if isinstance(members, dict):
            out[key] = {
                name: normalise_schema(sub, f"{where}/{key}/{name}", warnings)
                for name, sub in members.items()
            }
    properties = out.get("properties")
    if isinstance(properties, dict):
        out["properties"], lifted = _lift_required(properties, where, warnings)
        if lifted:
            listed = out.get("required")
            out["required"] = list(dict.fromkeys([*(listed if isinstance(listed, list) else []), *lifted]))
    return out


def _lift_required(
    properties: dict[str, Any], where: str, warnings: list[tuple[str, str]]
) -> tuple[dict[str, Any], list[str]]:
    """`required: true|false` on properties moved out; returns the properties and the names marked true."""
    lifted: list[str] = []
    fixed: dict[str, Any] = {}
    for name, sub in properties.items():
        if isinstance(sub, dict) and isinstance(sub.get("required"), bool):
            if sub["required"]:
                lifted.append(name)
            warnings.append(
                (
                    f"{where}/properties/{name}/required",
                    f"required: {str(sub['required']).lower()} on a property; read as the object's required list",
                )
            )
            sub = {k: v for k, v in sub.items() if k != "required"}
        fixed[name] = sub
    return fixed, lifted


def form_media(content: dict[str, Any]) -> str | None:
    """The form media type a request body's `content` offers (urlencoded first), or None."""
    for media in (FORM, MULTIPART):
        if any(str(m).split(";")[0].strip().lower() == media for m in content):
            return media
    return None


def form_key(content: dict[str, Any], media: str) -> str:
    """The key of `content` that is `media` (it may carry parameters: `multipart/form-data; charset=...`)."""
    return next(m for m in content if str(m).split(";")[0].strip().lower() == media)


def swagger_form(consumes: list[Any], has_file: bool) -> str:
    """The encoding of a Swagger 2.0 operation with `formData` parameters: multipart when it consumes it
    or uploads a file, else urlencoded."""
    wanted = {str(c).split(";")[0].strip().lower() for c in consumes}
    return MULTIPART if has_file or (MULTIPART in wanted and FORM not in wanted) else FORM


def file_field(description: Any) -> dict[str, Any]:
    """The schema of a file field: its content as text, sent as a file part of a multipart body."""
    text = str(description or "").strip()
    return {"type": "string", "description": (text + " " if text else "") + "(file content, as text)"}


def swagger_form_body(
    converter: Any, item: Any, forms: list[tuple[dict[str, Any], str]]
) -> tuple[dict[str, Any], bool]:
    """A Swagger 2.0 operation's `formData` parameters as one object body, urlencoded or multipart.

    `converter` is the importer's (`param_schema`, `document`); `item` its operation, whose `encoding` and
    `files` are set here.
    """
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param, where in forms:
        schema = converter.param_schema(param, where)
        if param.get("type") == "file":
            item.files.append(param["name"])
        elif isinstance(schema, dict) and param.get("description") and "description" not in schema:
            schema = {**schema, "description": str(param["description"])[:1000]}
        properties[param["name"]] = schema
        if param.get("required"):
            required.append(param["name"])
    consumes = item.op.get("consumes", converter.document.get("consumes")) or []
    item.encoding = swagger_form(consumes if isinstance(consumes, list) else [], bool(item.files))
    body: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        body["required"] = required
    return body, bool(required)
