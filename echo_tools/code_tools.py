"""The `code` tool type: a Python function's source as a tool (a canvas Code tool's `config.code`).

`execution_config` is `{"code": <source defining main>, "timeout_s"?: seconds, "memory_mb"?: MB}`. The
source is parsed with `ast` at registration, never run: it must parse and define a top-level `main`, and
`main`'s signature (annotations, defaults, `**kwargs`, the docstring's `Args:`) gives the input schema.
Each call runs it in the code sandbox (`backends/code.py`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.errors import ToolRegistrationError
from echo_tools.models import ToolPermission

if TYPE_CHECKING:
    from echo_tools.models import ToolDef

__all__ = ["ENTRY_POINT", "check_code_config", "code_input_schema", "parse_main"]

ENTRY_POINT = "main"
MAX_CODE_CHARS = 200_000
DEFAULT_TIMEOUT_S = 10.0
MAX_TIMEOUT_S = 60.0
DEFAULT_MEMORY_MB = 256
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "result": {"description": "What main returned (JSON; other values as their repr)"},
        "stdout": {"type": "string", "description": "What the code printed"},
    },
    "required": ["result", "stdout"],
}
# annotation name -> JSON Schema type (typing's and collections.abc's spellings included)
_JSON_TYPE = {
    "str": "string", "int": "integer", "float": "number", "bool": "boolean",
    "list": "array", "List": "array", "tuple": "array", "Tuple": "array", "set": "array",
    "Sequence": "array", "Iterable": "array", "dict": "object", "Dict": "object", "Mapping": "object",
}  # fmt: skip
_ARG_LINE = re.compile(r"^\s*\*{0,2}([A-Za-z_][A-Za-z0-9_]*)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def parse_main(code: Any, *, field: str = "execution_config.code") -> ast.FunctionDef | ast.AsyncFunctionDef:
    """The `main` function definition of `code`, parsed (never run).

    Raises:
        ValueError: `code` is not a string, is empty or too long, does not parse (the line is named), or
            defines no top-level `main` taking its arguments by name; the message names `field`.
    """
    if not isinstance(code, str) or not code.strip():
        raise ValueError(f"{field} must be Python source defining {ENTRY_POINT}(...), got {code!r:.80}")
    if len(code) > MAX_CODE_CHARS:
        raise ValueError(f"{field} is {len(code)} characters long; at most {MAX_CODE_CHARS} are allowed")
    try:
        module = ast.parse(code, filename="<code tool>")
    except SyntaxError as exc:
        raise ValueError(
            f"{field} does not parse: line {exc.lineno}: {exc.msg} ({(exc.text or '').strip()!r:.80})"
        ) from None
    found = [
        n
        for n in module.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == ENTRY_POINT
    ]
    if not found:
        defined = [n.name for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        raise ValueError(
            f"{field} defines no top-level function {ENTRY_POINT!r} (it defines {defined or 'no function'}); "
            f"write `def {ENTRY_POINT}(**kwargs):` or name its parameters: `def {ENTRY_POINT}(text: str):`"
        )
    main = found[-1]  # as Python does: the last definition wins
    if main.args.posonlyargs:
        raise ValueError(
            f"{field}: {ENTRY_POINT}'s parameter {main.args.posonlyargs[0].arg!r} is positional-only; "
            "the tool passes its arguments by name"
        )
    return main


def code_input_schema(code: Any, *, field: str = "execution_config.code") -> dict[str, Any]:
    """The input schema `main`'s signature gives (see `parse_main` for the errors)."""
    main = parse_main(code, field=field)
    params = [*main.args.args, *main.args.kwonlyargs]
    defaults: dict[str, ast.expr | None] = dict(
        zip([a.arg for a in main.args.args][::-1], main.args.defaults[::-1], strict=False)
    )
    defaults.update({a.arg: d for a, d in zip(main.args.kwonlyargs, main.args.kw_defaults, strict=True)})
    described = _docstring_args(ast.get_docstring(main) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in params:
        prop = _annotation_schema(param.annotation)
        default = defaults.get(param.arg)
        if default is None:
            required.append(param.arg)
        else:
            try:
                prop["default"] = ast.literal_eval(default)
            except ValueError:  # not a literal (a call, a name): optional without a default shown
                pass
        if described.get(param.arg):
            prop["description"] = described[param.arg]
        properties[param.arg] = prop
    kwarg = main.args.kwarg
    variadic = kwarg is not None
    if kwarg is not None:  # `main(**kwargs)`: the docstring's Args name what it reads
        for name, text in described.items():
            if name not in properties and name != kwarg.arg:
                properties[name] = {"description": text} if text else {}
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": variadic}
    if required:
        schema["required"] = required
    return schema


def code_description(code: str) -> str:
    """The first paragraph of `main`'s docstring ('' when it has none)."""
    doc = ast.get_docstring(parse_main(code)) or ""
    return doc.split("\n\n", 1)[0].strip()


def check_code_config(tool: ToolDef) -> None:
    """Raise `ToolRegistrationError` naming the field when a `code` tool's config cannot run.

    An input schema left empty is filled from `main`'s signature.
    """
    config = tool.execution_config
    try:
        schema = code_input_schema(config.get("code"))
    except ValueError as exc:
        raise _fail(tool, "execution_config.code", str(exc)) from None
    timeout = config.get("timeout_s", DEFAULT_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S:
        raise _fail(
            tool,
            "execution_config.timeout_s",
            f"execution_config.timeout_s must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {timeout!r}",
        )
    memory = config.get("memory_mb", DEFAULT_MEMORY_MB)
    if isinstance(memory, bool) or not isinstance(memory, int) or not 32 <= memory <= 2048:
        raise _fail(
            tool, "execution_config.memory_mb", f"execution_config.memory_mb must be 32..2048, got {memory!r}"
        )
    unknown = sorted(set(config) - {"code", "timeout_s", "memory_mb"})
    if unknown:
        raise _fail(
            tool,
            f"execution_config.{unknown[0]}",
            f"execution_config.{unknown[0]} is unknown; a code tool takes code, timeout_s and memory_mb",
        )
    if not tool.input_schema or tool.input_schema == {"type": "object"}:
        tool.input_schema = schema
    if ToolPermission.SHELL_EXECUTE not in tool.permissions:  # it runs a program, as tool_code_executor
        tool.permissions = [*tool.permissions, ToolPermission.SHELL_EXECUTE]


def _fail(tool: ToolDef, field: str, message: str) -> ToolRegistrationError:
    return ToolRegistrationError(f"Tool {tool.tool_id!r}: {message}", tool_id=tool.tool_id, field=field)


def _annotation_schema(node: ast.expr | None) -> dict[str, Any]:
    if node is None:
        return {}
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a string annotation
        try:
            node = ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return {}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):  # `int | None`
        return _union([node.left, node.right])
    if isinstance(node, ast.Subscript):
        outer = _name_of(node.value)
        inner = node.slice
        if outer == "Optional":
            return _union([inner, ast.Constant(None)])
        if outer == "Union" and isinstance(inner, ast.Tuple):
            return _union(list(inner.elts))
        kind = _JSON_TYPE.get(outer or "")
        if kind == "array":
            items = inner.elts[0] if isinstance(inner, ast.Tuple) and inner.elts else inner
            item_schema = _annotation_schema(items)
            return {"type": "array", **({"items": item_schema} if item_schema else {})}
        return {"type": kind} if kind else {}
    if isinstance(node, ast.Constant) and node.value is None:
        return {"type": "null"}
    kind = _JSON_TYPE.get(_name_of(node) or "")
    return {"type": kind} if kind else {}


def _union(members: list[ast.expr]) -> dict[str, Any]:
    schemas = [_annotation_schema(m) for m in members]
    types = [s.get("type") for s in schemas]
    if any(not isinstance(t, str) for t in types):
        return {}  # a member we cannot express: accept anything
    return {"type": list(dict.fromkeys(types))}


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):  # typing.List, collections.abc.Mapping
        return node.attr
    return None


def _docstring_args(doc: str) -> dict[str, str]:
    """`{name: description}` from a Google-style `Args:` section."""
    found: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:", "Parameters:", "Keyword Args:", "Kwargs:"):
            in_args = True
            continue
        if in_args and stripped.endswith(":") and not line.startswith((" ", "\t")):
            break  # the next section (Returns:)
        match = _ARG_LINE.match(line) if in_args else None
        if match:
            found[match.group(1)] = match.group(2).strip()
    return found


def merge_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """`execution_config` with the defaults filled in (what a call runs with)."""
    return {
        "code": config["code"],
        "timeout_s": float(config.get("timeout_s", DEFAULT_TIMEOUT_S)),
        "memory_mb": int(config.get("memory_mb", DEFAULT_MEMORY_MB)),
    }
