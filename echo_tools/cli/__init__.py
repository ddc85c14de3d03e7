"""The `echo-tools` command (`main`), its parser, and what commands share.

`main.py` holds the catalogue commands and the parser; one module per command group (`mcp`, `history`,
`serve`, `thirdparty`); `common` and `catalogue` what they share. Other packages add commands through the
entry-point group `echo_tools.commands` (the workflow bridge adds `run`, `resume`, `replay`, `compile`, `demo`);
they use the names exported here (and `echo_tools.console`), never the modules inside.
"""

from echo_tools.cli.catalogue import open_executor, open_registry, refused_hint
from echo_tools.cli.common import PROG
from echo_tools.cli.history import run_history
from echo_tools.cli.main import build_parser, cmd_list, main
from echo_tools.cli.output import LivePrinter, quiet_framework_logs, quiet_rehearsal_log
from echo_tools.console import CliError, print_json, read_json_object, storage_dir, use_rich

__all__ = [
    "PROG",
    "CliError",
    "LivePrinter",
    "build_parser",
    "cmd_list",
    "main",
    "open_executor",
    "open_registry",
    "print_json",
    "quiet_framework_logs",
    "quiet_rehearsal_log",
    "read_json_object",
    "refused_hint",
    "run_history",
    "storage_dir",
    "use_rich",
]
