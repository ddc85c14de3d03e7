"""Child of the concurrency tests: register tools into a shared folder, one line of output per outcome.

Usage: _register_worker.py FOLDER PREFIX COUNT [NAME_PREFIX]. Tool ids are `<PREFIX>_<i>`; names are
`<NAME_PREFIX or PREFIX> tool <i>`, so workers given the same NAME_PREFIX compete for the same names.
It prints `ready` once imported and waits for a line on stdin before the first registration, so the test
can start all workers at once (their imports take longer than their registrations); each outcome line
ends with the `time.monotonic_ns()` of that registration, to show that the workers overlapped.
"""

from __future__ import annotations

import sys
import time

from echo_tools.errors import ToolNameConflictError
from echo_tools.registry import ToolRegistry


def main() -> None:
    folder, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    name_prefix = sys.argv[4] if len(sys.argv) > 4 else prefix
    registry = ToolRegistry(storage_dir=folder)
    print("ready", flush=True)
    sys.stdin.readline()  # the start signal
    for i in range(count):
        tool = {
            "tool_id": f"{prefix}_{i:04d}",
            "name": f"{name_prefix} tool {i:04d}",
            "description": f"tool {i} of {prefix}",
            "tool_type": "local",
            "input_schema": {"type": "object", "properties": {"i": {"type": "integer"}}},
            "execution_config": {"module": "AgentTools.sample", "function": "run"},
        }
        try:
            registry.register(tool)
            print(f"ok {tool['tool_id']} {time.monotonic_ns()}", flush=True)
        except ToolNameConflictError:
            print(f"clash {tool['tool_id']} {time.monotonic_ns()}", flush=True)


if __name__ == "__main__":
    main()
