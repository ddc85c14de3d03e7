"""Fixtures shared by the echo_tools tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._cli_support import InProcessCli, in_process_cli


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[InProcessCli]:
    """`run_cli(home, *args)`: the `echo-tools` command in-process over the storage `home`; returns a
    `CliResult` (exit code, stdout, stderr)."""
    yield from in_process_cli(monkeypatch, capsys)
