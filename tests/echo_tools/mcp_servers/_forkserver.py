"""A fork server for the stdio test servers: it imports the MCP SDK once, then forks one process per server
start, so a start costs a fork instead of the ~0.7 s of CPU of importing `mcp` in a fresh interpreter.

`python _forkserver.py SOCKET` listens on the Unix socket SOCKET (and prints `READY` once it does).
`_launch.py` (the command in the test configs) hands it its stdin, stdout and stderr and its argv, env and
working folder; the forked child runs the server script as `__main__` on those pipes, so the client talks
to a real SDK server process over real pipes. The fork server tells the launcher the child's pid, and its
exit status once it is reaped; the launcher exits with it and forwards SIGTERM/SIGINT to the child.
"""

from __future__ import annotations

import json
import os
import runpy
import selectors
import signal
import socket
import sys

# what every test server imports: paid once here instead of once per start
import anyio  # noqa: F401
import mcp.server.fastmcp  # noqa: F401
import mcp.server.lowlevel  # noqa: F401
import mcp.server.stdio  # noqa: F401
import mcp.types  # noqa: F401
import uvicorn  # noqa: F401  (the servers over HTTP)


def _run_child(conn: socket.socket, fds: list[int], request: dict, inherited: list[int]) -> None:
    """In the forked child: become the server process the launcher stands for, and never return."""
    code = 1
    try:
        for fd in inherited:  # the fork server's own ends: the listener, the wakeup pipe, other launchers
            os.close(fd)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        conn.close()
        signal.set_wakeup_fd(-1)
        # the signal dispositions of a fresh interpreter
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.argv = list(request["argv"])
        script = sys.argv[0]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # boundary: the server's own failure ends its process, as in a fresh interpreter
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve(path: str) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    waiting: dict[int, socket.socket] = {}  # child pid -> its launcher's connection
    print("READY", flush=True)
    while True:
        for key, _ in selector.select():
            if key.fileobj == wake_r:
                os.read(wake_r, 512)
                _reap(waiting)
                continue
            conn, _ = listener.accept()
            try:
                message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
                request = json.loads(message)
            except (OSError, ValueError):
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                inherited = [listener.fileno(), wake_r, wake_w, *(c.fileno() for c in waiting.values())]
                _run_child(conn, fds, request, inherited)
            for fd in fds:
                os.close(fd)
            waiting[pid] = conn
            conn.sendall(f"{pid}\n".encode())
        _reap(waiting)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()


if __name__ == "__main__":
    serve(sys.argv[1])
