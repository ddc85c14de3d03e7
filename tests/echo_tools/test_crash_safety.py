"""A writer killed with SIGKILL at random points: the folder always loads, each tool old or new, index parses.

Each round starts a writer that rewrites every tool with the round's version and kills it after a random
number of completed saves (read from its output, so no sleeping): the kill lands inside a later save.
"""

from __future__ import annotations

import json
import random
import signal
from pathlib import Path

from echo_tools.registry import ToolRegistry
from echo_tools.storage import INDEX_FILE, ToolStorage

from ._storage_support import spawn_script, tool_dict

TOOLS = 12
ROUNDS = 30


def _seed_folder(folder: Path) -> dict[str, str]:
    storage = ToolStorage(folder)
    for i in range(TOOLS):
        storage.save(ToolRegistry()._coerce(tool_dict(f"Crash Tool {i:02d}", version="0")))
    return {t.tool_id: t.version for t in storage.load_all()[0]}


def test_a_writer_killed_at_random_points_never_leaves_a_broken_folder(tmp_path: Path) -> None:
    folder = tmp_path / "tools"
    versions = _seed_folder(folder)
    rng = random.Random(20260121)
    killed_mid_round = 0
    for round_no in range(1, ROUNDS + 1):
        new_version = str(round_no)
        writer = spawn_script("_crash_worker.py", str(folder), new_version, str(round_no))
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ready", writer.stderr.read() if writer.stderr else ""
        for _ in range(rng.randrange(TOOLS)):
            assert writer.stdout.readline().startswith("saved ")
        writer.send_signal(signal.SIGKILL)
        writer.communicate(timeout=30)
        killed_mid_round += writer.returncode == -signal.SIGKILL

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
