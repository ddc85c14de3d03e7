"""Helpers of the CLI tests: the `echo-tools` command in a subprocess (one smoke test per command group)
and in-process through `echo_tools.cli.main(argv)` (everything else), both giving exit code, stdout and
stderr, so the same assertions hold for either.

A subprocess costs a fresh interpreter and its imports (about 7 s of CPU for `run`, which imports CrewAI and
LangGraph); in-process the imports are paid once per test session. The subprocesses are forked from a server
of this test process that imported those modules once (tests/_forkserver.py: a child differs from a fresh
`python -m echo_tools.cli` only in the modules already imported); ECHO_TEST_CLI_FORK=0 starts each one fresh.
"""

from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import _forkserver


@dataclass(frozen=True)
class CliResult:
    """What one command printed and returned (the fields of `subprocess.CompletedProcess` we read)."""

    returncode: int
    stdout: str
    stderr: str


# variables of one command, on top of the ones every command gets; None: unset for that command
Env = Mapping[str, str | None]


# what a command imports, at most: imported once by the fork server, not by each command
PRELOADED = [
    "echo_tools.cli.main",
    "workflow_bridge.commands",
    "workflow_bridge.runner",
    "langgraph.graph",
    "fastapi",
]
_FORK_SERVER: list[str] = []
_FORK_LOCK = threading.Lock()


def python() -> list[str]:
    """The command standing for `python` in the CLI subprocesses: a child of this process's fork server,
    started at the first call with this process's environment and stopped when the process exits."""
    if os.environ.get("ECHO_TEST_CLI_FORK") == "0":
        return [sys.executable]
    with _FORK_LOCK:
        if not _FORK_SERVER:
            import atexit

            path = os.path.join(tempfile.mkdtemp(prefix="echo-cli-fork-"), "fork.sock")
            atexit.register(_forkserver.stop, _forkserver.start(path, PRELOADED, env=dict(os.environ)))
            _FORK_SERVER.append(path)
    return _forkserver.command(_FORK_SERVER[0])


def cli(
    home: Path, *args: str, timeout: float = 120, env: Env | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m echo_tools.cli ARGS` in a subprocess, over the storage folder `home`, with `env` on top
    of this process's environment and `stdin` (if given) on its standard input."""
    environ = {**os.environ, "ECHO_TOOLS_HOME": str(home), "NO_COLOR": "1"}
    environ.pop("ECHO_TOOLS_API_KEY", None)
    for name, value in (env or {}).items():
        if value is None:
            environ.pop(name, None)
        else:
            environ[name] = value
    return subprocess.run(
        [*python(), "-m", "echo_tools.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environ,
        timeout=timeout,
    )


class InProcessCli:
    """`echo_tools.cli.main(argv)` in this process, with the environment a subprocess would get.

    The environment is set through `monkeypatch` (undone after the test), `env` and `stdin` for this one
    command only; argparse's `SystemExit` (usage errors, `--help`) becomes the exit code, as it would for
    the process. Any other exception propagates, which is what `--debug` asks for.
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.monkeypatch = monkeypatch
        self.capsys = capsys

    def __call__(self, home: Path, *args: str, env: Env | None = None, stdin: str | None = None) -> CliResult:
        _set_environment(self.monkeypatch, home)
        self.capsys.readouterr()  # drop anything printed before this command
        with pytest.MonkeyPatch.context() as command:
            for name, value in (env or {}).items():
                if value is None:
                    command.delenv(name, raising=False)
                else:
                    command.setenv(name, value)
            if stdin is not None:
                command.setattr(sys, "stdin", io.StringIO(stdin))
            code = _main(args)
        out, err = self.capsys.readouterr()
        return CliResult(code, out, err)


def run_in_process(home: Path, *args: str) -> CliResult:
    """`echo_tools.cli.main(argv)` in this process where no test's `monkeypatch` and `capsys` exist (the
    set-up of a module-scoped fixture): the environment is set for the call and put back, the output caught
    with `redirect_stdout`/`redirect_stderr`, and the workflow runner's logger filters (see `run_cli` in
    conftest.py) and the root logger's handlers (`run` adds a stderr one when there is none) restored."""
    logger, root = logging.getLogger("workflow_bridge.runner"), logging.getLogger()
    filters, handlers = list(logger.filters), list(root.handlers)
    out, err = io.StringIO(), io.StringIO()
    try:
        with pytest.MonkeyPatch.context() as monkeypatch, redirect_stdout(out), redirect_stderr(err):
            _set_environment(monkeypatch, home)
            code = _main(args)
    finally:
        logger.filters[:] = filters
        root.handlers[:] = handlers
    return CliResult(code, out.getvalue(), err.getvalue())


def _set_environment(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    monkeypatch.setenv("ECHO_TOOLS_HOME", str(home))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")  # argparse wraps help to the terminal, if there is one
    monkeypatch.delenv("ECHO_TOOLS_API_KEY", raising=False)


def _main(args: tuple[str, ...]) -> int:
    """`main(args)`'s exit code; argparse's `SystemExit` becomes the code the process would exit with."""
    from echo_tools.cli import main

    try:
        return main(list(args))
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)


def assert_one_line_error(result: CliResult | subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The command failed with exit `code` and printed exactly one `echo-tools: ...` line on stderr."""
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("echo-tools: ")
    return lines[0]
