"""What every `echo-tools` command shares: the program name, `CliError`, where the storage is, the
allowed modules, reading `--input`, printing JSON. Standard library only: commands import it at startup.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

PROG = "echo-tools"
ENV_ALLOWED_MODULES = "ECHO_TOOLS_ALLOWED_MODULES"


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def agent_tools_dir() -> Path | None:
    """The folder of the installed `AgentTools` package (found without importing it)."""
    import importlib.util

    spec = importlib.util.find_spec("AgentTools")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def storage_dir(args: argparse.Namespace) -> Path:
    from echo_tools.settings import default_storage_dir

    return Path(args.storage) if args.storage else default_storage_dir()


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


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in the file `path`; `what` names it in the error (`--input file`, `workflow file`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{what} {str(path)!r} cannot be read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise CliError(f"{what} {str(path)!r} is not UTF-8 text: {exc.reason} at byte {exc.start}") from exc
    return json_object(text, f"{what} {str(path)!r}")


def json_object(text: str, source: str) -> dict[str, Any]:
    """`text` parsed as a JSON object; `source` names where it came from in the error."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{source} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    if not isinstance(data, dict):
        raise CliError(f"{source} must be a JSON object, got {type(data).__name__}: {text.strip()[:60]!r}")
    return data


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def use_rich() -> bool:
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
