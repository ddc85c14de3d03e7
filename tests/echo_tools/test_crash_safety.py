"""A writer killed with SIGKILL at random points: the folder always loads, each tool old or new, index parses.

Each round forks a writer (from a server process that imported `echo_tools` once) that rewrites every tool
with the round's version, and kills it after a random number of completed saves (read from its output, so
no sleeping): the kill lands inside a later save.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE, ToolStorage

from ._storage_support import HERE, REPO_ROOT, child_env, tool_dict

TOOLS = 12
ROUNDS = 30


def _seed_folder(folder: Path) -> dict[str, str]:
    storage = ToolStorage(folder)
    for i in range(TOOLS):
        storage.save(ToolRegistry()._coerce(tool_dict(f"Crash Tool {i:02d}", version="0")))
    return {t.tool_id: t.version for t in storage.load_all()[0]}


@pytest.fixture
def fork_server(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    server = subprocess.Popen(
        [sys.executable, str(HERE / "_crash_worker.py"), str(tmp_path / "tools")],
        cwd=REPO_ROOT,
        env=child_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    try:
        assert server.stdout.readline() == "started\n", server.stderr.read() if server.stderr else ""
        yield server
    finally:
        _, err = server.communicate(timeout=30)  # closes stdin: the server's loop ends
        assert server.returncode == 0, err


def _line(server: subprocess.Popen[str]) -> str:
    assert server.stdout is not None
    line = server.stdout.readline()
    assert line, server.stderr.read() if server.stderr else "the fork server ended"
    return line.strip()


@pytest.mark.slow  # 30 writers killed, the folder loaded after each
def test_a_writer_killed_at_random_points_never_leaves_a_broken_folder(
    tmp_path: Path, fork_server: subprocess.Popen[str]
) -> None:
    folder = tmp_path / "tools"
    versions = _seed_folder(folder)
    rng = random.Random(20260121)
    killed_mid_round = 0
    assert fork_server.stdin is not None
    for round_no in range(1, ROUNDS + 1):
        new_version = str(round_no)
        fork_server.stdin.write(f"{new_version} {round_no}\n")
        fork_server.stdin.flush()
        ready, pid = _line(fork_server).split()
        assert ready == "ready"
        for _ in range(rng.randrange(TOOLS)):
            assert _line(fork_server).startswith("saved ")
        os.kill(int(pid), signal.SIGKILL)
        while not (line := _line(fork_server)).startswith("exited "):
            assert line.startswith("saved ")  # saves completed before the kill landed
        _, exited_pid, killed_by, _ = line.split()
        assert exited_pid == pid
        killed_mid_round += int(killed_by) == signal.SIGKILL

        index = json.loads((folder / INDEX_FILE).read_text())  # parses after every kill
        assert isinstance(index["tools"], dict)
        registry = ToolRegistry(storage_dir=folder)
        assert registry.problems() == [], f"round {round_no}: {registry.problems()}"
        loaded = {t.tool_id: t.version for t in registry.list_all()}
        assert sorted(loaded) == sorted(versions), f"round {round_no}: a tool vanished"
        for tool_id, version in loaded.items():
            assert version in (versions[tool_id], new_version), f"round {round_no}: {tool_id} has {version}"
            expected_text = f"at version {version} " if version != "0" else "The Crash Tool"
            assert expected_text in registry.get(tool_id).description
        # loading repaired any index the kill left behind
        assert sorted(json.loads((folder / INDEX_FILE).read_text())["tools"]) == sorted(versions)
        versions = loaded
    assert killed_mid_round == ROUNDS  # every writer was still running when it was killed
