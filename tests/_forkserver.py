"""A Python for tests that starts in milliseconds: forked from a server that imported the heavy modules once.

`python -P _forkserver.py serve SOCKET MODULE...` (`start`) imports the modules, prints `ready`, then answers
each connection on the Unix socket SOCKET with a forked child running `python ARGS` (`SCRIPT ...` or `-m
MODULE ...`) in the requester's folder, environment and standard streams, ending as that interpreter would
(SystemExit, atexit, shutdown); it exits when its standard input ends or on SIGTERM. `python -S -P
_forkserver.py SOCKET ARGS...` (`command`) is the requester, standing for the child where `python` would be
named: it forwards SIGTERM, SIGINT and SIGHUP to the child and exits with its status (128 + N for signal N);
with no server on SOCKET it runs `python ARGS` in its own place (exec).

A child differs from a fresh `python ARGS` only in the modules already imported: its signal dispositions,
sys.path[0] and streams are a fresh interpreter's, and its server waits for it, so its CPU is counted. The
start-up settings (the `PYTHON*` variables) must be the server's: other ones are refused. Why: importing
CrewAI costs about 4 s of CPU, the MCP SDK about 0.6 s; a fork costs milliseconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import Any

HEADER = struct.Struct("!I")


READY_TIMEOUT_S = 120.0  # the imports take seconds; a server not ready by then is stuck


def start(path: str, modules: list[str], python: str = sys.executable, **popen: Any) -> subprocess.Popen[str]:
    """Start a server on socket `path` that imports `modules` (`popen`: env, stderr), run by `python` (this
    interpreter, or another one: the MCP tests' servers of the other SDK generation); its `Popen` once it
    is ready. `stop` it (or let this process end: its standard input is this process's pipe)."""
    command = [python, "-P", __file__, "serve", path, *modules]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, **popen)
    assert server.stdout is not None and server.stdin is not None
    watchdog = threading.Timer(READY_TIMEOUT_S, server.kill)  # imports that hang must not hang the suite
    watchdog.start()
    try:
        line = server.stdout.readline()
    finally:
        watchdog.cancel()
    if line != "ready\n":  # '' when it ended (or was killed by the watchdog)
        stop(server)
        raise RuntimeError(f"the fork server did not start; it printed {line!r}")
    return server


def stop(server: subprocess.Popen[str]) -> None:
    """End a server of `start` (its standard input ends) and wait for it."""
    assert server.stdin is not None and server.stdout is not None
    server.stdin.close()
    server.stdout.close()
    try:
        server.wait(10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


def command(path: str, python: str = sys.executable) -> list[str]:
    """The command that stands for `python` with the server on `path`: append ARGS."""
    return [python, "-S", "-P", __file__, path]


def serve(path: str, modules: list[str]) -> socket.socket:
    """Import `modules`, then fork a child per connection; returns only in a child, with its connection."""
    import gc
    import importlib

    for name in modules:
        importlib.import_module(name)
    gc.freeze()  # the children share the imported modules' pages instead of copying them at a collection
    signal.signal(signal.SIGCHLD, _reap)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([listener, sys.stdin], [], [])
        if sys.stdin in readable:
            sys.exit(0)
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):  # a fresh interpreter's dispositions
                signal.signal(sig, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)
            return conn
        conn.close()


def _reap(signum: int, frame: object) -> None:
    # waited for, not ignored: a child's CPU then counts in the server's, as a test's measurement expects
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass


def answer(conn: socket.socket) -> dict[str, Any]:
    """In the server's child: fork the child that runs the request, tell the requester its pid and then
    its status; returns the request only in that child."""
    header, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    (size,) = HEADER.unpack(header)
    with conn.makefile("rb") as stream:
        request: dict[str, Any] = json.loads(stream.read(size))
    pid = os.fork()
    if pid == 0:
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.setsid()  # signals reach it from its requester, not from the server's process group
        return request
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    watched = os.pidfd_open(pid)
    readable, _, _ = select.select([conn.fileno(), watched], [], [])
    if watched not in readable:  # the requester is gone (killed): so is its child
        os.kill(pid, signal.SIGKILL)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    with contextlib.suppress(OSError):  # unless the requester is gone
        conn.sendall(f"{status}\n".encode())
    os._exit(0)


def become(request: dict[str, Any]) -> None:
    """Run `python ARGS` of the request here; SystemExit and the interpreter's exit end the process."""
    import runpy

    env: dict[str, str] = request["env"]
    startup = {k: v for k, v in env.items() if k.startswith("PYTHON")}
    if startup != {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}:
        sys.exit(f"_forkserver: the request's PYTHON* variables differ from the server's: {startup}")
    os.environ.clear()
    os.environ.update(env)
    os.chdir(request["cwd"])
    args: list[str] = request["args"]
    module = args[1] if args[:1] == ["-m"] and len(args) > 1 else None
    if not env.get("PYTHONSAFEPATH"):  # what Python puts first on sys.path; the server runs with -P
        sys.path.insert(0, request["cwd"] if module else os.path.dirname(os.path.abspath(args[0])))
    if module:
        sys.argv = ["-m", *args[2:]]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(args)
        runpy.run_path(args[0], run_name="__main__")


def request(path: str, args: list[str]) -> int:
    """Have the server at `path` run `python ARGS` with this process's folder, environment and streams
    (`python ARGS` in this process's place when none listens there); the child's exit status."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        os.execv(sys.executable, [sys.executable, *args])
    forwarded = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, forwarded)  # held until the child's pid is known
    body = json.dumps({"args": args, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(conn, [HEADER.pack(len(body))], [0, 1, 2])
    conn.sendall(body)
    devnull = os.open(os.devnull, os.O_RDWR)  # the child holds the streams: they end when it does
    for fd in (0, 1):
        os.dup2(devnull, fd)
    replies = conn.makefile("r", encoding="ascii")
    if not (pid := replies.readline()):
        sys.exit("_forkserver: the server did not start the child")

    def forward(sig: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), sig)

    for sig in forwarded:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, forwarded)
    if not (status := replies.readline()):
        sys.exit("_forkserver: the server's child ended without a status")
    return int(status) if int(status) >= 0 else 128 - int(status)


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        become(answer(serve(sys.argv[2], sys.argv[3:])))
    else:
        sys.exit(request(sys.argv[1], sys.argv[2:]))
