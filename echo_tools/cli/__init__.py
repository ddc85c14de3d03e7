"""The `echo-tools` command (`main`), its parser, and what commands share.

`main.py` holds the catalogue commands and the parser; one module per command group (`mcp`, `history`,
`serve`, `thirdparty`); `common` and `catalogue` what they share. Other packages add commands through the
entry-point group `echo_tools.commands` (the workflow bridge adds `run`, `resume`, `replay`, `compile`, `demo`).
"""

from echo_tools.cli.catalogue import open_executor, open_registry
from echo_tools.cli.common import PROG, CliError, print_json, storage_dir
from echo_tools.cli.main import build_parser, main

__all__ = [
    "PROG",
    "CliError",
    "build_parser",
    "main",
    "open_executor",
    "open_registry",
    "print_json",
    "storage_dir",
]
