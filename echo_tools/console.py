"""What a command line needs, for the `echo-tools` command and the commands other packages add to it
(the entry-point group `echo_tools.commands`): `CliError`, reading a JSON object from a file or a string,
printing JSON, whether to print with colour, where the storage is. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from echo_tools.settings import StorageChoice

__all__ = [
    "CliError", "json_object", "print_json", "read_json_object", "storage_choice", "storage_dir", "use_rich"
]  # fmt: skip


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def storage_dir(args: argparse.Namespace) -> Path:
    """`--storage`, else the storage folder found from the current folder (`settings.find_storage`)."""
    return storage_choice(args).path


def storage_choice(args: argparse.Namespace) -> StorageChoice:
    """The storage folder of a command and how it was chosen (what its messages name)."""
    from echo_tools.settings import find_storage

    return find_storage(getattr(args, "storage", None))


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
    """`data` as indented JSON on standard output."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def use_rich() -> bool:
    """Colour and tables: only on a terminal, and not with `NO_COLOR` set."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")
