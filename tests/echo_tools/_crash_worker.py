"""Child of the crash-safety test: rewrite every tool of a folder with a new version until killed.

Usage: _crash_worker.py FOLDER VERSION SEED. Saves each tool (in a shuffled order) with `version` set to
VERSION, printing `saved <tool_id>` after each; the test SIGKILLs it at a random point.
"""

from __future__ import annotations

import random
import sys

from echo_tools.storage import ToolStorage


def main() -> None:
    folder, version, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    storage = ToolStorage(folder)
    tools, problems = storage.load_all()
    if problems:
        raise SystemExit(f"folder had problems before the round: {problems}")
    random.Random(seed).shuffle(tools)
    print("ready", flush=True)
    for tool in tools:
        updated = tool.model_copy(
            update={"version": version, "description": f"{tool.name} at version {version} " + "x" * 2000}
        )
        storage.save(updated)
        print(f"saved {tool.tool_id}", flush=True)


if __name__ == "__main__":
    main()
