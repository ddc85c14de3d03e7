"""One request of an imported `api` tool: each argument goes where its `execution_config.arguments` says.

`arguments` maps an argument to `{"in": "path" | "query" | "header" | "body", "name": <name on the
wire>, "style"?, "explode"?}` (OpenAPI's serialisation rules); `in: "body"` is the whole JSON body, and
arguments not listed are properties of the JSON body. Kept apart from `echo_tools.openapi` so a call never
imports the importer.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

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
    return method, url, query, body, headers
