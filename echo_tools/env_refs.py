"""`${NAME}` references to environment variables in stored configuration (API headers, MCP servers' `env`
and `headers`): found, and replaced with the environment's values at call or connect time, never stored
resolved. Which names a remote definition may use is `trust.check_env_references`'s concern.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from echo_tools.errors import ToolConfigError

ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(values: Mapping[str, Any], missing: Callable[[str, str], ToolConfigError]) -> dict[str, str]:
    """`values` (as strings) with every `${NAME}` replaced from the environment, read now.

    Raises:
        ToolConfigError: `missing(key, name)`, for the first variable that is not set.
    """
    out: dict[str, str] = {}
    for key, value in values.items():
        text = str(value)
        for name in ENV_REFERENCE.findall(text):
            if name not in os.environ:
                raise missing(key, name)
        out[key] = ENV_REFERENCE.sub(lambda m: os.environ[m.group(1)], text)
    return out


def resolve_env_refs(values: Mapping[str, str], *, server: str, field: str) -> dict[str, str]:
    """An MCP server's `env` or `headers` with `${NAME}` replaced (at connect time, never stored).

    Raises:
        ToolConfigError: a referenced variable is not set (the server, field and variable are named).
    """

    def missing(key: str, name: str) -> ToolConfigError:
        return ToolConfigError(
            f"MCP server {server!r}: {field}.{key} refers to environment variable {name!r}, which is not set",
            field=f"mcpServers.{server}.{field}.{key}",
        )

    return expand(values, missing)
