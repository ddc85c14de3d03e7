"""Several processes writing into one storage folder: nothing lost, the index exact, names unique."""

from __future__ import annotations

import json
from pathlib import Path

from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE

from ._storage_support import spawn_script

PROCESSES = 4
TOOLS_EACH = 200


def _wait_all(workers: list, timeout: float = 240.0) -> list[list[str]]:  # type: ignore[type-arg]
    outputs = []
    for worker in workers:
        out, err = worker.communicate(timeout=timeout)
        assert worker.returncode == 0, err
        outputs.append(out.split("\n")[:-1])
    return outputs


def test_four_processes_registering_200_tools_each_lose_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    workers = [
        spawn_script("_register_worker.py", str(folder), f"p{p}", str(TOOLS_EACH)) for p in range(PROCESSES)
    ]
    outputs = _wait_all(workers)
    assert [len(lines) for lines in outputs] == [TOOLS_EACH] * PROCESSES
    assert all(line.startswith("ok ") for lines in outputs for line in lines)

    expected = sorted(f"p{p}_{i:04d}" for p in range(PROCESSES) for i in range(TOOLS_EACH))
    registry = ToolRegistry(storage_dir=folder)
    assert registry.problems() == []
    assert [t.tool_id for t in registry.list_all()] == expected
    index = json.loads((folder / INDEX_FILE).read_text())
    assert sorted(index["tools"]) == expected and index["tool_count"] == PROCESSES * TOOLS_EACH
    assert index["tools"]["p3_0199"]["name"] == "p3 tool 0199"
    assert sorted(p.name for p in folder.iterdir() if not p.name.endswith(".json")) == [".echo_tools.lock"]


def test_processes_racing_for_the_same_names_leave_one_owner_per_name(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    count = 40
    workers = [
        spawn_script("_register_worker.py", str(folder), f"r{p}", str(count), "Shared")
        for p in range(PROCESSES)
    ]
    outputs = _wait_all(workers)
    winners: dict[int, list[str]] = {}
    for lines in outputs:
        for line in lines:
            outcome, tool_id = line.split()
            if outcome == "ok":
                winners.setdefault(int(tool_id.rsplit("_", 1)[1]), []).append(tool_id)
    assert sorted(winners) == list(range(count))
    assert all(len(ids) == 1 for ids in winners.values()), winners
    registry = ToolRegistry(storage_dir=folder)
    assert registry.problems() == [] and len(registry) == count
    assert sorted(t.tool_id for t in registry.list_all()) == sorted(ids[0] for ids in winners.values())
