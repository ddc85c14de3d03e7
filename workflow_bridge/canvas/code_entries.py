"""Canvas `code` tool entries with code: the `code` tool each one binds.

A Code tool whose `config.code` defines `main(**kwargs)` (or named parameters) becomes a `code` tool
(`echo_tools.code_tools`): its id is `code_<hash of the code and timeout>`, so the same code maps to the
same tool wherever it is attached, and `main`'s signature is its input schema. Code that does not parse,
has no `main`, or a bad `config.timeout` cannot bind, and the caller reports why naming the field. Nothing
is registered for an entry that cannot bind. An entry with empty code is the generic code executor.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from echo_tools.code_tools import MAX_TIMEOUT_S, code_description, code_input_schema
from echo_tools.errors import ToolError
from echo_tools.models import ToolPermission

if TYPE_CHECKING:
    from echo_tools.models import ToolDef
    from echo_tools.registry import ToolRegistry

__all__ = ["CODE_PERMISSIONS", "code_tool", "has_code"]

CODE_PERMISSIONS = [ToolPermission.SHELL_EXECUTE.value]  # as tool_code_executor: it runs a program
_GENERIC_NAMES = frozenset({"", "code", "code execution", "code tool"})


def has_code(config: Mapping[str, Any]) -> bool:
    """True when a Code entry's config carries code of its own (else it is the generic executor)."""
    code = config.get("code")
    return not (code is None or (isinstance(code, str) and not code.strip()))  # not a string: reported


def code_tool(
    registry: ToolRegistry | None, config: Mapping[str, Any], label: str | None
) -> tuple[ToolDef | None, str, str]:
    """The `code` tool a Code entry's `config` binds: `(tool, "", "")`, or `(None, field, why)`.

    `field` is the config key at fault (`code`, `language`, `timeout`), relative to the entry's `config`.
    """
    code = config.get("code")
    language = str(config.get("language") or "python")
    if language.lower() != "python":
        return None, "language", f"only python code runs; config.language is {language!r}"
    try:
        schema = code_input_schema(code, field="config.code")
    except ValueError as exc:
        return None, "code", str(exc)
    timeout = config.get("timeout", config.get("timeout_s"))
    if timeout in (None, ""):
        timeout = None
    elif isinstance(timeout, str):
        try:
            timeout = float(timeout)
        except ValueError:
            pass
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= MAX_TIMEOUT_S
    ):
        return (
            None,
            "timeout",
            (
                f"config.timeout must be a number of seconds in (0, {MAX_TIMEOUT_S:g}], got {config.get('timeout')!r}"
            ),
        )
    if registry is None:
        return None, "code", "the code tool cannot be registered: there is no tool registry"
    assert isinstance(code, str)  # code_input_schema refused anything else
    execution = {"code": code, **({"timeout_s": timeout} if timeout is not None else {})}
    digest = hashlib.sha256(repr(sorted(execution.items())).encode()).hexdigest()[:12]
    tool_id = f"code_{digest}"
    existing = registry.get(tool_id)
    if existing is not None:  # content-addressed: the same code is the same tool
        return existing, "", ""
    name = str(label or "").strip()
    if name.lower() in _GENERIC_NAMES:
        name = "Code tool"
    if registry.resolve(name) is not None:
        name = f"{name} {digest[:8]}"
    params = ", ".join(schema["properties"]) or "**kwargs"
    definition = {
        "tool_id": tool_id,
        "name": name,
        "description": code_description(code)
        or f"Runs the Python function main({params}) in a sandbox and returns what it returns.",
        "tool_type": "code",
        "input_schema": schema,
        "execution_config": execution,
        "permissions": CODE_PERMISSIONS,
        "side_effect": "external",
        "timeout_ms": int(((timeout or 10.0) + 10.0) * 1000),  # the sandbox's own limit fires first
        "tags": ["code", "canvas"],
    }
    try:
        registry.register(definition)
    except (ToolError, ValueError) as exc:
        return None, "code", f"registering the code tool failed: {exc}"
    return registry.require(tool_id), "", ""
