"""What every `echo-tools` command shares: the program name, the allowed modules, reading `--input`; and,
from their public home `echo_tools.console` (which commands added by other packages use), `CliError`,
reading JSON objects, printing JSON and where the storage is. Standard library only: commands import it
at startup."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from echo_tools.console import CliError, json_object, print_json, read_json_object, storage_dir, use_rich

__all__ = [
    "ENV_ALLOWED_MODULES",
    "PROG",
    "CliError",
    "agent_tools_dir",
    "allowed_modules",
    "json_object",
    "print_json",
    "read_input",
    "read_json_object",
    "storage_dir",
    "use_rich",
]

PROG = "echo-tools"
ENV_ALLOWED_MODULES = "ECHO_TOOLS_ALLOWED_MODULES"


def agent_tools_dir() -> Path | None:
    """The folder of the installed `AgentTools` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("AgentTools")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def allowed_modules(args: argparse.Namespace) -> list[str]:
    """The packages given with `--allow-module` (before or after the command) and in
    `$ECHO_TOOLS_ALLOWED_MODULES` (separated by commas or the path separator)."""
    given = [*(getattr(args, "allow_module", None) or ()), *(getattr(args, "allow_module_late", None) or ())]
    env = os.environ.get(ENV_ALLOWED_MODULES, "")
    from_env = [m.strip() for part in env.split(os.pathsep) for m in part.split(",") if m.strip()]
    return [*given, *from_env]


def read_input(text: str | None) -> dict[str, Any]:
    """`--input` as a JSON object: inline JSON, or `@path` to read it from a file."""
    if text is None:
        return {}
    if text.startswith("@"):
        return read_json_object(Path(text[1:]), "--input file")
    return json_object(text, "--input")
