"""Child of the read-only storage test: open a registry on a 0o555 folder and try to write into it.

Usage: _readonly_child.py FOLDER. Prints one JSON line: what loaded, and how each write failed.
"""

from __future__ import annotations

import json
import os
import sys

from echo_tools.errors import ToolError
from echo_tools.registry import ToolRegistry


def attempt(action) -> dict[str, str | None]:  # type: ignore[no-untyped-def]
    try:
        action()
    except ToolError as exc:
        return {"error_type": type(exc).__name__, "message": str(exc), "field": exc.field}
    return {"error_type": None, "message": None, "field": None}


def main() -> None:
    folder = sys.argv[1]
    probe = os.path.join(folder, "probe")
    try:
        open(probe, "w").close()
        kernel_refuses = False
        os.unlink(probe)
    except PermissionError:
        kernel_refuses = True
    registry = ToolRegistry(storage_dir=folder)
    new_tool = {
        "name": "Read Only Probe",
        "description": "must not be stored",
        "execution_config": {"module": "AgentTools.probe", "function": "run"},
    }
    report = {
        "kernel_refuses_writes": kernel_refuses,
        "loaded": sorted(t.tool_id for t in registry.list_all()),
        "problems": [str(p) for p in registry.problems()],
        "register": attempt(lambda: registry.register(new_tool)),
        "delete": attempt(lambda: registry.delete("tool_calculator")),
        "still_resolves_calculator": registry.resolve("Calculator") is not None,
        "probe_in_memory": registry.resolve("Read Only Probe") is not None,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
