"""One request of an imported `api` tool: each argument goes where its `execution_config.arguments` says.

`arguments` maps an argument to `{"in": "path" | "query" | "header" | "body", "name": <name on the
wire>, "style"?, "explode"?}` (OpenAPI's serialisation rules); `in: "body"` is the whole JSON body, and
arguments not listed are properties of the JSON body, or of a form body when `execution_config.body_encoding`
names one (`application/x-www-form-urlencoded`, `multipart/form-data`). Kept apart from `echo_tools.openapi` so a call never
imports the importer.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from echo_tools.errors import ToolValidationError

if TYPE_CHECKING:
    from echo_tools.models import ToolDef

DELIMITERS = {"form": ",", "spaceDelimited": " ", "pipeDelimited": "|"}


def _text(value: Any) -> str:
    """A scalar as it is written in a URL or header (`true`, not `True`; JSON for anything nested)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _simple(value: Any, explode: bool) -> str:
    """OpenAPI's `simple` style (path and header): `a,b,c`, objects as `k,v,k,v` (`k=v,k=v` exploded)."""
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, dict):
        if explode:
            return ",".join(f"{k}={_text(v)}" for k, v in value.items())
        return ",".join(f"{k},{_text(v)}" for k, v in value.items())
    return _text(value)


def _query(params: list[tuple[str, str]], name: str, value: Any, spec: dict[str, Any]) -> None:
    style = spec.get("style", "form")
    explode = spec.get("explode", style == "form")
    if isinstance(value, list):
        if explode and style == "form":
            params.extend((name, _text(v)) for v in value)
        else:
            params.append((name, DELIMITERS.get(style, ",").join(_text(v) for v in value)))
    elif isinstance(value, dict):
        if style == "deepObject":
            params.extend((f"{name}[{k}]", _text(v)) for k, v in value.items())
        elif explode:
            params.extend((str(k), _text(v)) for k, v in value.items())
        else:
            params.append((name, ",".join(f"{k},{_text(v)}" for k, v in value.items())))
    else:
        params.append((name, _text(value)))


def build_mapped_request(tool: ToolDef, args: dict[str, Any]) -> tuple[str, str, Any, Any, dict[str, str]]:
    """`(method, url, query, json_body, headers)` of one call of an imported tool.

    Raises:
        ToolValidationError: a path parameter has no value (the argument is named).
    """
    config = tool.execution_config
    method = str(config.get("method", "GET")).upper()
    url = str(config["url"])
    mapping: dict[str, dict[str, Any]] = config["arguments"]
    query: list[tuple[str, str]] = [(str(k), _text(v)) for k, v in (config.get("query") or {}).items()]
    headers: dict[str, str] = {}
    body: Any = None
    fields: dict[str, Any] = {}
    for arg, spec in mapping.items():
        if spec.get("in") == "path" and args.get(arg) is None:
            raise ToolValidationError(
                f"Tool {tool.tool_id!r}: input.{arg} is required to fill the path parameter "
                f"{{{spec.get('name', arg)}}}",
                tool_id=tool.tool_id,
                field=f"input.{arg}",
            )
    for arg, value in args.items():
        found = mapping.get(arg)
        if found is None:
            fields[arg] = value
            continue
        spec = found
        where, name = spec.get("in"), str(spec.get("name", arg))
        if where == "path":
            text = _simple(value, bool(spec.get("explode", False)))
            if text in (".", ".."):  # a dot segment is normalised away: it would reach another endpoint
                raise ToolValidationError(
                    f"Tool {tool.tool_id!r}: input.{arg} may not be {text!r}, which would change the path",
                    tool_id=tool.tool_id,
                    field=f"input.{arg}",
                )
            url = url.replace("{" + name + "}", quote(text, safe=""))
        elif value is None:
            continue
        elif where == "query":
            _query(query, name, value, spec)
        elif where == "header":
            headers[name] = _simple(value, bool(spec.get("explode", False)))
        elif where == "body":
            body = value
    if fields:
        body = {**body, **fields} if isinstance(body, dict) else fields
    encoding = config.get("body_encoding")
    if encoding and isinstance(body, dict):
        body = encode_form(body, str(encoding), config.get("files") or ())
        headers["Content-Type"] = body.content_type
    return method, url, query, body, headers


@dataclass(frozen=True)
class EncodedBody:
    """A body already encoded (a form), sent as these bytes with this `Content-Type`."""

    content: bytes
    content_type: str


def encode_form(fields: dict[str, Any], encoding: str, files: Any = ()) -> EncodedBody:
    """`fields` as `application/x-www-form-urlencoded` or `multipart/form-data` (a list repeats its field;
    a field named in `files` is a file part whose content is the value, its file name the field's)."""
    pairs = [
        (str(name), _text(item))
        for name, value in fields.items()
        if value is not None
        for item in (value if isinstance(value, list) else [value])
    ]
    if encoding != "multipart/form-data":
        return EncodedBody(urlencode(pairs).encode("ascii"), "application/x-www-form-urlencoded")
    boundary = uuid.uuid4().hex
    parts: list[bytes] = []
    for name, text in pairs:
        quoted = name.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
        disposition = f'form-data; name="{quoted}"' + (f'; filename="{quoted}"' if name in files else "")
        kind = "Content-Type: application/octet-stream\r\n" if name in files else ""
        parts.append(
            f"--{boundary}\r\nContent-Disposition: {disposition}\r\n{kind}\r\n".encode()
            + text.encode()
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    return EncodedBody(b"".join(parts), f"multipart/form-data; boundary={boundary}")
