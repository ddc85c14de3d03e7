"""The first code the sandboxed interpreter runs: confine itself, report what it applied, run main.py.

It runs as the server's user (root in a container) for a few milliseconds: joins the run's memory cgroup,
applies rlimits, enters new network, IPC, mount and PID namespaces where the kernel allows, mounts one
size-capped tmpfs that holds the working folder, /tmp, /var/tmp, /dev/shm and /run, forks the program as
PID 2 of its own PID namespace (with its own /proc; when it ends the kernel kills every process left in
the namespace) while this process waits, reports how full the run's space got and passes the exit status
on, sets no_new_privs, drops to the run's own unprivileged uid, writes one status line to the status file
descriptor, sets the caller's environment variables, then executes `main.py` from the working directory.
It is passed to `python -I -S -c`, so it imports only the stdlib; imported as a module it does nothing.
"""

import ctypes
import json
import os
import resource
import signal
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET, CLONE_NEWPID = 0x00020000, 0x10000000, 0x40000000, 0x20000000
CLONE_NEWIPC = 0x08000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
# host folders replaced by folders of the run's own tmpfs: (mount point, folder in the tmpfs, mode)
PRIVATE = (
    ("/tmp", "tmp", 0o1777),
    ("/var/tmp", "var_tmp", 0o1777),
    ("/dev/shm", "shm", 0o1777),
    ("/run", "run", 0o755),
    ("/var/run", "run", 0o755),
)
FULL_BELOW = 64 * 1024  # free bytes under which the run's space counts as full


def _main():
    cfg = json.loads(sys.argv[1])
    workdir, status_fd = cfg["workdir"], cfg["status_fd"]
    applied = {
        "cgroup": _join_cgroup(cfg.get("cgroup")),  # first: every process of the run starts inside it
        "rlimits": {},
        "network": "not isolated",
        "ipc": "shared with the host: System V IPC objects made by the run outlive it",
        "unix_sockets": "not isolated: the host's Unix sockets are reachable where their permissions allow",
        "tmp": "shared with the host",
        "writable": "not bounded as a whole: the working folder is on the host's disk, only each file is "
        f"limited (RLIMIT_FSIZE {cfg['rlimits'].get('RLIMIT_FSIZE')} bytes)",
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
    namespaces = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | (0 if root else CLONE_NEWUSER)
    pid_namespace = cfg["isolate"] and libc.unshare(namespaces | CLONE_NEWPID) == 0
    space = None
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
        applied["ipc"] = "isolated: own IPC namespace (System V IPC and POSIX queues vanish with the run)"
        space = _private_space(libc, workdir, cfg["tmpfs_mb"], cfg.get("uid") if root else None, applied)
    elif cfg["isolate"]:
        applied["network"] = f"not isolated: unshare failed ({os.strerror(ctypes.get_errno())})"
    if pid_namespace:
        applied["processes"] = _enter_pid_namespace(libc, status_fd, space)
    if space is not None:
        os.close(space)
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
    os.write(status_fd, json.dumps(applied).encode() + b"\n")
    os.close(status_fd)  # the program never holds the server's status file
    os.environ.update(cfg.get("env") or {})  # only now: nothing the caller set reached the confinement
    _run(workdir, cfg.get("argv", []))


def _join_cgroup(procs_file):
    if not procs_file:
        return "no cgroup was made for the run"
    try:
        with open(procs_file, "w") as handle:
            handle.write(str(os.getpid()))
    except OSError as exc:
        return f"cannot join {procs_file}: {exc.strerror}"
    return "joined"


def _set_limits(limits, applied):
    for name, value in limits.items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
            applied["rlimits"][name] = value
        except (ValueError, OSError, AttributeError) as exc:
            applied["rlimits"][name] = f"not applied: {exc}"


def _enter_pid_namespace(libc, status_fd, space):
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
        _relay(init, read_end, status_fd, space)  # never returns
    os.close(read_end)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    mounted = libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) == 0
    error = "" if mounted else os.strerror(ctypes.get_errno())
    program = os.fork()
    if program:
        os.close(status_fd)
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


def _relay(init, read_end, status_fd, space):
    """Wait for the namespace's init, report how full the run's space got, end as the program ended."""
    _, init_status = os.waitpid(init, 0)
    with os.fdopen(read_end, "rb") as pipe:
        text = pipe.read().decode() or "-"
    status = int(text) if text.lstrip("-").isdigit() and text != "-" else init_status
    ended: dict[str, object] = {"ended": True}
    if space is not None:
        try:
            fs = os.fstatvfs(space)
            free = fs.f_bavail * fs.f_frsize
            ended.update(writable_free_bytes=free, writable_full=free < FULL_BELOW or fs.f_favail == 0)
        except OSError as exc:
            ended["writable_error"] = exc.strerror
    os.write(status_fd, json.dumps(ended).encode() + b"\n")
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _bind(libc, source, target):
    return libc.mount(source.encode(), target.encode(), None, MS_BIND, None) == 0


def _private_space(libc, workdir, size_mb, owner, applied):
    """Mount one tmpfs of `size_mb` for the working folder, /tmp, /var/tmp, /dev/shm and /run.

    The tmpfs is mounted on the working folder's path first (only in this mount namespace: the host's
    folder is untouched), filled with the files the server wrote there, then its sub-folders are bound
    over the host's folders. Returns a descriptor of the tmpfs's root (for the relay's report), or None.
    """
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        applied["tmp"] = f"shared with the host: mount propagation failed ({os.strerror(ctypes.get_errno())})"
        return None
    host = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    options = f"size={size_mb}m,mode=755".encode()
    if libc.mount(b"tmpfs", workdir.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        os.close(host)
        applied["tmp"] = f"shared with the host: tmpfs mount failed ({os.strerror(ctypes.get_errno())})"
        return None
    space = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY)
    for name, mode in {(name, mode) for _, name, mode in PRIVATE} | {("work", 0o700)}:
        os.mkdir(name, mode, dir_fd=space)
        os.chmod(name, mode, dir_fd=space)  # not narrowed by the umask
    work = os.open("work", os.O_RDONLY | os.O_DIRECTORY, dir_fd=space)
    _copy_files(host, work, owner)
    os.close(host)
    hidden: list[str] = []
    missed: list[str] = []
    for target, name, _ in PRIVATE:
        if os.path.islink(target) or not os.path.isdir(target):
            continue  # /var/run is usually a link to /run
        (hidden if _bind(libc, f"/proc/self/fd/{space}/{name}", target) else missed).append(target)
    if not os.path.isdir(workdir):
        os.makedirs(workdir)  # inside the run's own /tmp now
    if not _bind(libc, f"/proc/self/fd/{work}", workdir):
        raise OSError(ctypes.get_errno(), "cannot mount the run's working folder")
    os.close(work)
    where = ", ".join(hidden)
    applied["tmp"] = f"private: {where} are folders of the run's own tmpfs, discarded when the run ends"
    if missed:
        applied["writable"] = f"partly bounded: the host's {', '.join(missed)} could not be replaced"
        applied["unix_sockets"] = f"partly isolated: host sockets under {', '.join(missed)} are reachable"
        return space
    applied["writable"] = (
        f"run: one tmpfs of {size_mb} MB holds the working folder and {where}; nothing the run writes "
        "there reaches the host's disk"
    )
    applied["unix_sockets"] = (
        f"isolated: {where} are the run's own and the host's abstract sockets belong to another network "
        "namespace; socket files elsewhere that everyone may write stay reachable"
    )
    return space


def _copy_files(source, target, owner):
    """Copy the files the server wrote (main.py and the caller's files) into the run's working folder."""
    for name in os.listdir(source):
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=source)
        with os.fdopen(fd, "rb") as handle:
            data = handle.read()
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=target)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        if owner is not None:
            os.chown(name, owner, owner, dir_fd=target)
    if owner is not None:
        os.chown(target, owner, owner)


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

        tb = exc.__traceback__
        traceback.print_exception(type(exc), exc, tb.tb_next if tb is not None else None)
        sys.exit(1)


if __name__ == "__main__":  # run by `python -c`; importing this module must do nothing
    _main()
