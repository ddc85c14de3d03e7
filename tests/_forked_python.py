"""A Python for the doc examples that starts in milliseconds: the agent frameworks are imported once.

`python -P _forked_python.py serve SOCKET MODULE...` imports the modules, prints `ready`, then (until its
standard input ends) answers each connection on the Unix socket SOCKET with a forked child that runs `python
ARGS` (`SCRIPT ...` or `-m MODULE ...`) in the requester's folder, environment and standard streams, and exits
as that interpreter would (SystemExit, atexit, the interpreter's shutdown). `python -S -P _forked_python.py
SOCKET ARGS...` is the requester: it exits with the child's status (128 + N when signal N ended it), so a
shell function can stand in for a command. A child differs from a fresh `python ARGS` only in the modules
already imported; the interpreter's start-up settings (the `PYTHON*` variables) must be the server's.

Each request costs a fork instead of a fresh interpreter importing CrewAI (about 4 s of CPU).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys
from typing import Any

HEADER = struct.Struct("!I")


def serve(path: str, modules: list[str]) -> socket.socket:
    """Import `modules`, then fork a child per connection; returns only in a child, with its connection."""
    import gc
    import importlib

    for name in modules:
        importlib.import_module(name)
    gc.freeze()  # the children share the imported modules' pages instead of copying them at a collection
    signal.signal(signal.SIGCHLD, _reap)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(16)
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable:  # end of input: whoever started the server is done with it (or gone)
            sys.exit(0)
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            return conn
        conn.close()


def _reap(signum: int, frame: object) -> None:
    # waited for, not ignored: a child's CPU then counts in the server's, as a test's measurement expects
    try:
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def answer(conn: socket.socket) -> dict[str, Any]:
    """In the server's child: fork the child that runs the request and report its status, or return
    the request in that child."""
    header, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    (size,) = HEADER.unpack(header)
    body = b""
    while len(body) < size:
        body += conn.recv(size - len(body))
    request: dict[str, Any] = json.loads(body)
    pid = os.fork()
    if pid == 0:
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        return request
    for fd in fds:
        os.close(fd)
    watched = os.pidfd_open(pid)
    readable, _, _ = select.select([conn, watched], [], [])
    if conn in readable and watched not in readable:  # the requester is gone (killed): so is its command
        os.kill(pid, signal.SIGKILL)
    code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    conn.sendall(str(code if code >= 0 else 128 - code).encode())
    os._exit(0)


def become(request: dict[str, Any]) -> None:
    """Run `python ARGS` of the request here; SystemExit and the interpreter's exit end the process."""
    import runpy

    startup = {k: v for k, v in request["env"].items() if k.startswith("PYTHON")}
    if startup != {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}:
        sys.exit(f"_forked_python: the request's PYTHON* variables differ from the server's: {startup}")
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    args: list[str] = request["args"]
    if args[:1] == ["-m"] and len(args) > 1:
        sys.argv = ["-m", *args[2:]]
        sys.path.insert(0, request["cwd"])
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")


def request(path: str, args: list[str]) -> int:
    """Ask the server at `path` to run `python ARGS` with this process's folder, environment and streams."""
    body = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(path)
        socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
        conn.sendall(body)
        status = conn.recv(16)
    if not status:
        sys.stderr.write("_forked_python: the server's child ended without a status\n")
        return 1
    return int(status)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        become(answer(serve(sys.argv[2], sys.argv[3:])))
    else:
        sys.exit(request(sys.argv[1], sys.argv[2:]))
