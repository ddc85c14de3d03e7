"""Several processes writing into one storage folder: nothing lost, the index exact, names unique.

The workers import, print `ready`, and wait; the test starts them together, so their registrations really
overlap (without the start signal a worker could finish before the next one had imported `echo_tools`).
Each test also checks that the workers' registrations did interleave, so a passing run proves the race ran.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE

from ._storage_support import HERE, REPO_ROOT, child_env

PROCESSES = 4
# Each registration is one locked read-modify-write of the index: a missing or broken lock loses an entry
# as soon as two writers interleave once. Started together, the workers take turns with the lock again and
# again (`_assert_interleaved` fails the test if they do not). With the lock taken out of `ToolStorage`,
# 4 x 50 lost 140 of the 200 index entries and the name race gave names three or four owners; so 50 each
# finds the bug as surely as the former 200, at a fraction of the cost (every write rewrites the whole index).
TOOLS_EACH = 50


def _start_together(folder: Path, *worker_args: list[str]) -> list[subprocess.Popen[str]]:
    workers = [
        subprocess.Popen(
            [sys.executable, str(HERE / "_register_worker.py"), str(folder), *args],
            cwd=REPO_ROOT,
            env=child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in worker_args
    ]
    for worker in workers:
        assert worker.stdout is not None
        line = worker.stdout.readline()
        assert line == "ready\n", (line, worker.stderr.read() if worker.stderr else "")
    for worker in workers:
        assert worker.stdin is not None
        worker.stdin.write("go\n")
        worker.stdin.flush()
    return workers


def _wait_all(workers: list[subprocess.Popen[str]], timeout: float = 240.0) -> list[list[str]]:
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=timeout)
        assert worker.returncode == 0, err
        outputs.append(out.split("\n")[:-1])
    return outputs


def _assert_interleaved(outputs: list[list[str]]) -> None:
    """The workers ran at the same time: ordered by their timestamps (one clock for all processes), every
    worker's span of registrations overlaps every other's, and the lock changed hands between workers again
    and again. How often varies with the machine: registering is now cheap enough (the meta-check takes
    microseconds) that a worker often takes the lock again right after releasing it; measured 49-97 of 199
    consecutive registrations from different workers on a quiet machine, 22-32 of 159 under load. An
    unlocked read-modify-write can lose an entry at each of them."""
    spans = [(int(lines[0].split()[2]), int(lines[-1].split()[2])) for lines in outputs]
    assert all(a0 < b1 and b0 < a1 for i, (a0, a1) in enumerate(spans) for (b0, b1) in spans[i + 1 :]), spans
    events = sorted((int(line.split()[2]), worker) for worker, lines in enumerate(outputs) for line in lines)
    switches = sum(1 for (_, a), (_, b) in zip(events, events[1:], strict=False) if a != b)
    assert switches >= 4 * len(outputs), f"only {switches} of {len(events) - 1} registrations interleaved"


@pytest.mark.slow  # four processes, 200 contended writes
def test_four_processes_registering_50_tools_each_lose_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    workers = _start_together(folder, *([f"p{p}", str(TOOLS_EACH)] for p in range(PROCESSES)))
    outputs = _wait_all(workers)
    assert [len(lines) for lines in outputs] == [TOOLS_EACH] * PROCESSES
    assert all(line.startswith("ok ") for lines in outputs for line in lines)
    _assert_interleaved(outputs)

    expected = sorted(f"p{p}_{i:04d}" for p in range(PROCESSES) for i in range(TOOLS_EACH))
    # the index as the writers left it, read before a registry load could repair it (without the lock,
    # this run loses most index entries: 140 of 200 in one trial)
    index = json.loads((folder / INDEX_FILE).read_text())
    assert sorted(index["tools"]) == expected and index["tool_count"] == PROCESSES * TOOLS_EACH
    registry = ToolRegistry(storage_dir=folder)
    assert registry.problems() == []
    assert [t.tool_id for t in registry.list_all()] == expected
    last = f"p{PROCESSES - 1}_{TOOLS_EACH - 1:04d}"
    assert index["tools"][last]["name"] == f"p{PROCESSES - 1} tool {TOOLS_EACH - 1:04d}"
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".json")) == [".echo_tools.lock"]


@pytest.mark.slow  # four processes racing
def test_processes_racing_for_the_same_names_leave_one_owner_per_name(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    count = 40
    workers = _start_together(folder, *([f"r{p}", str(count), "Shared"] for p in range(PROCESSES)))
    outputs = _wait_all(workers)
    _assert_interleaved(outputs)
    winners: dict[int, list[str]] = {}
    for lines in outputs:
        for line in lines:
            outcome, tool_id, _ = line.split()
            if outcome == "ok":
                winners.setdefault(int(tool_id.rsplit("_", 1)[1]), []).append(tool_id)
    assert sorted(winners) == list(range(count))
    assert all(len(ids) == 1 for ids in winners.values()), winners
    registry = ToolRegistry(storage_dir=folder)
    assert registry.problems() == [] and len(registry) == count
    assert sorted(t.tool_id for t in registry.list_all()) == sorted(ids[0] for ids in winners.values())
