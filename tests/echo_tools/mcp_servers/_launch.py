"""`python _launch.py SOCKET SCRIPT ARGS...`: start the test server SCRIPT through the fork server listening
on SOCKET (`_forkserver.py`), on this process's stdin, stdout and stderr; exit with the server's status.

Without a fork server listening there, it runs SCRIPT in this process's place (exec), as a config without
the launcher would. Imports nothing heavy: this process only stands for the forked server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def main(path: str, argv: list[str]) -> int:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        os.execv(sys.executable, [sys.executable, *argv])
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    # the server holds the pipes now: the client sees them close when the server ends, not this process
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    replies = conn.makefile("r", encoding="ascii")
    pid = int(replies.readline())

    def forward(sig: int, _frame: object) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    status = replies.readline()
    code = int(status) if status.strip() else 1
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2:]))
