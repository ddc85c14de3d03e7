"""Child of the crash-safety test: a fork server whose children rewrite every tool of a folder until killed.

Usage: _crash_worker.py FOLDER. Imports once, prints `started`, then for each line `VERSION SEED` on stdin
forks a writer child, which prints `ready <pid>` and saves each tool (in an order shuffled by SEED) with
`version` set to VERSION, printing `saved <tool_id>` after each; the test SIGKILLs that child at a random
point. The server waits for the child and prints `exited <pid> <signal or 0> <exit code or -1>`.
Forking from a process that already imported `echo_tools` makes a round cost milliseconds instead of an
interpreter start, so the test can afford many kills.
"""

from __future__ import annotations

import os
import random
import sys

from echo_tools.storage import ToolStorage


def write_round(folder: str, version: str, seed: int) -> None:
    storage = ToolStorage(folder)
    tools, problems = storage.load_all()
    if problems:
        raise SystemExit(f"folder had problems before the round: {problems}")
    random.Random(seed).shuffle(tools)
    print(f"ready {os.getpid()}", flush=True)
    for tool in tools:
        updated = tool.model_copy(
            update={"version": version, "description": f"{tool.name} at version {version} " + "x" * 2000}
        )
        storage.save(updated)
        print(f"saved {tool.tool_id}", flush=True)


def main() -> None:
    folder = sys.argv[1]
    print("started", flush=True)
    for line in sys.stdin:
        version, seed = line.split()
        pid = os.fork()
        if pid == 0:  # the writer child: never returns into the server's loop
            code = 0
            try:
                write_round(folder, version, int(seed))
            except SystemExit as exc:
                sys.stderr.write(f"{exc.code}\n")
                code = 3
            finally:
                sys.stdout.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        signal = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -1
        print(f"exited {pid} {signal} {code}", flush=True)


if __name__ == "__main__":
    main()
