"""The first code the sandboxed interpreter runs: confine itself, report what it applied, run main.py.

It runs as the server's user (root in a container) for a few milliseconds, applies rlimits, enters new
network and mount namespaces where the kernel allows, mounts private /tmp, /var/tmp and /dev/shm, sets
no_new_privs, drops to the run's own unprivileged uid, writes one status line to stderr, then executes
`main.py` from the working directory. It is passed to `python -I -S -c`, so it imports only the stdlib.
"""

import ctypes
import json
import os
import resource
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38
MARKER = b"\x1eECHO-SANDBOX "


def _main() -> None:
    cfg = json.loads(sys.argv[1])
    workdir = cfg["workdir"]
    applied: dict = {
        "rlimits": {},
        "network": "not isolated",
        "tmp": "shared with the host",
        "user": "unchanged",
    }
    for name, value in cfg["rlimits"].items():
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
            applied["rlimits"][name] = value
        except (ValueError, OSError, AttributeError) as exc:
            applied["rlimits"][name] = f"not applied: {exc}"
    libc = ctypes.CDLL(None, use_errno=True)
    root = os.geteuid() == 0
    uid = os.getuid()
    gid = os.getgid()
    namespaces = CLONE_NEWNET | CLONE_NEWNS | (0 if root else CLONE_NEWUSER)
    if cfg["isolate"] and libc.unshare(namespaces) == 0:
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
