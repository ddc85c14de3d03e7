"""The first code the sandboxed interpreter runs: confine itself, report what it applied, run main.py.

It runs as the server's user (root in a container) for a few milliseconds, applies rlimits, enters new
network, mount and PID namespaces where the kernel allows, mounts private /tmp, /var/tmp and /dev/shm,
forks the program as PID 1 of its own PID namespace (with its own /proc; when it ends the kernel kills
every process left in the namespace) while this process waits and passes its exit status on, sets
no_new_privs, drops to the run's own unprivileged uid, writes one status line to stderr, then executes
`main.py` from the working directory. It is passed to `python -I -S -c`, so it imports only the stdlib.
"""

import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x10000000, 0x40000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
MARKER = b"\x1eECHO-SANDBOX "


def _main() -> None:
    cfg = json.loads(sys.argv[1])
    workdir = cfg["workdir"]
    applied: dict = {
        "rlimits": {},
        "network": "not isolated",
        "tmp": "shared with the host",
        "user": "unchanged",
        "processes": "shared PID namespace: the server kills the process group (and the run's uid)",
    }
    limits = dict(cfg["rlimits"])
    nproc = limits.pop("RLIMIT_NPROC", None)  # set after the fork below, which it would count against
    _set_limits(limits, applied)
    libc = ctypes.CDLL(None, use_errno=True)
    root = os.geteuid() == 0
    uid = os.getuid()
    gid = os.getgid()
    namespaces = CLONE_NEWNET | CLONE_NEWNS | (0 if root else CLONE_NEWUSER)
    pid_namespace = cfg["isolate"] and libc.unshare(namespaces | CLONE_NEWPID) == 0
    if pid_namespace or (cfg["isolate"] and libc.unshare(namespaces) == 0):
        if not root:  # map our own uid into the new user namespace so files keep their owner
            for path, text in (
                ("setgroups", "deny"),
                ("uid_map", f"{uid} {uid} 1"),
                ("gid_map", f"{gid} {gid} 1"),
            ):
                with open(f"/proc/self/{path}", "w") as handle:
                    handle.write(text)
        applied["network"] = "isolated: empty network namespace (no interfaces up, not even loopback)"
        applied["tmp"] = _private_tmp(libc, workdir, cfg["tmpfs_mb"])
    elif cfg["isolate"]:
        applied["network"] = f"not isolated: unshare failed ({os.strerror(ctypes.get_errno())})"
    if pid_namespace:
        applied["processes"] = _enter_pid_namespace(libc)
    if nproc is not None:
        _set_limits({"RLIMIT_NPROC": nproc}, applied)
    os.chdir(workdir)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0:
        applied["no_new_privs"] = True
    run_uid = cfg.get("uid")
    if not root:
        applied["user"] = (
            "the server's own uid (not root: no switch; RLIMIT_NPROC counts the server user's processes)"
        )
    elif run_uid is not None:
        try:
            os.setgroups([])
            os.setgid(run_uid)
            os.setuid(run_uid)
            applied["user"] = f"uid {run_uid} (unprivileged, used by this run only)"
        except OSError as exc:
            applied["user"] = f"unchanged (root): setuid({run_uid}) failed: {exc}"
    else:
        applied["user"] = "unchanged (root): no interpreter readable by an unprivileged user was found"
    os.write(2, MARKER + json.dumps(applied).encode() + b"\n")
    _run(workdir, cfg.get("argv", []))


def _set_limits(limits, applied):
    for name, value in limits.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
            applied["rlimits"][name] = value
        except (ValueError, OSError, AttributeError) as exc:
            applied["rlimits"][name] = f"not applied: {exc}"


def _enter_pid_namespace(libc):
    """Start the program as PID 2 of the new PID namespace, under a small init, and relay how it ended.

    Three processes: this one stays outside and ends the way the program ended (the server watches it);
    PID 1 of the namespace reaps orphans and, when the program ends, exits, which makes the kernel kill
    whatever is left in the namespace; the program runs as PID 2, so signals behave as usual for it
    (PID 1 would ignore its own SIGTERM).
    """
    read_end, write_end = os.pipe()
    init = os.fork()
    if init:
        os.close(write_end)
        _relay(init, read_end)  # never returns
    os.close(read_end)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    mounted = libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0
    error = "" if mounted else os.strerror(ctypes.get_errno())
    program = os.fork()
    if program:
        while True:  # PID 1: reap every child until the program itself ends
            pid, status = os.wait()
            if pid == program:
                os.write(write_end, str(status).encode())
                os._exit(0)
    os.close(write_end)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    note = "isolated: own PID namespace; every process of the run is killed when the program ends"
    if mounted:
        return note + "; /proc shows only the run's processes"
    return note + f"; /proc still shows the host's processes ({error})"


def _relay(init, read_end):
    """Wait for the namespace's init and end this process the way the program ended (code or signal)."""
    _, init_status = os.waitpid(init, 0)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode() or "-"
    status = int(text) if text.lstrip("-").isdigit() and text != "-" else init_status
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _private_tmp(libc, workdir, size_mb):
    """Mount fresh tmpfs over /tmp, /var/tmp and /dev/shm; keep the working dir visible at its path."""
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"shared with the host: mount propagation failed ({os.strerror(ctypes.get_errno())})"
    keep = os.open(workdir, os.O_PATH | os.O_DIRECTORY)
    mounted = []
    for target in ("/tmp", "/var/tmp", "/dev/shm"):
        options = f"size={size_mb}m,mode=1777".encode()
        if (
            os.path.isdir(target)
            and libc.mount(b"tmpfs", target.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) == 0
        ):
            mounted.append(target)
    if not os.path.isdir(workdir):
        os.makedirs(workdir)
        if libc.mount(f"/proc/self/fd/{keep}".encode(), workdir.encode(), None, MS_BIND, None) != 0:
            raise OSError(ctypes.get_errno(), "cannot bind the working directory into the private /tmp")
    os.close(keep)
    if not mounted:
        return "shared with the host: tmpfs mounts failed"
    return f"private: fresh tmpfs of {size_mb} MB on {', '.join(mounted)}, discarded when the run ends"


def _run(workdir, argv):
    with open("main.py", encoding="utf-8") as handle:
        source = handle.read()
    sys.argv = ["main.py", *argv]
    sys.path.insert(0, workdir)
    code = compile(source, "main.py", "exec")
    scope = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
    try:
        exec(code, scope)
    except SystemExit:
        raise
    except BaseException as exc:  # boundary: report the program's own exception like python would
        import traceback

        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
        sys.exit(1)


_main()
