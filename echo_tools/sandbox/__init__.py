"""Run Python code in a separate, confined process: the engine behind `code` tools and the shipped
code_executor and code_tester tools.

What is isolated (each item is checked at run time and reported in `SandboxRun.isolation`, never assumed):

- Process: the program runs as PID 2 of its own PID namespace under a tiny init (where the kernel allows
  namespaces), with its own /proc that shows only the run's processes; when the program ends the init
  exits and the kernel kills everything left in the namespace. On top, a new session and process group
  killed on exit or timeout, every process of the run's cgroup, and every process left with the run's uid.
- Memory: `memory_mb` bounds all the run's processes together (a memory cgroup made for the run, see
  `_cgroup.py`); over it, the kernel kills a process and the server kills the whole run and says so in
  `SandboxRun.limit_hit`. Each process also has an address-space rlimit of `memory_mb`. Without a usable
  memory controller only the per-process limit holds, and the report says so.
- Limits (rlimits): CPU seconds, address space, processes (RLIMIT_NPROC, effective because the run has its
  own uid), open files, size of any file written, no core dumps. Wall-clock timeout on top.
- User (when the server runs as root and a world-readable interpreter exists): the code runs as a fresh
  unprivileged uid, so it cannot write files the host's users own, read root-only files (0600, /root) or
  read other processes' environment; no_new_privs stops set-uid programs from regaining privileges.
- Network and IPC (when the kernel allows new namespaces): an empty network namespace, no interface up,
  which also makes the host's abstract Unix sockets unreachable; an IPC namespace, so System V IPC and
  POSIX message queues made in a run vanish with it.
- Writable space: one size-capped tmpfs (`tmpfs_mb`) per run, in the run's own mount namespace, holds the
  working folder, /tmp, /var/tmp, /dev/shm and /run (hiding the host's Unix sockets there); a run that
  fills it is told "No space left on device" and the result names the limit. Nothing the run writes
  there reaches the host's disk; all of it is gone when the run ends.
- Environment: the process starts with PATH, HOME and LANG only; the caller's variables (checked by
  `check_env`: no name the loader or the interpreter reads) are set by the bootstrap after confinement.
- Output: stdin, stdout and stderr are files in a folder only the server can open; the file-size rlimit
  stops a flood (the program gets "File too large"), and the first `max_output_bytes` are returned.

What is NOT isolated: world-readable files on the host can be read (source trees, /etc); world-writable
folders and socket files outside /tmp, /var/tmp, /dev/shm and /run can be written and connected to; the
kernel is shared (no seccomp filter, no VM). Treat this as containment for agent-written code and
mistakes, not as a boundary against a determined attacker with a kernel exploit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from . import _cgroup

_BOOTSTRAP = (Path(__file__).parent / "_bootstrap.py").read_text(encoding="utf-8")
_UID_RANGE = (1_000_000, 1_900_000)  # far above distribution and container uid ranges
_used_uids: set[int] = set()
_LAUNCH_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}  # plus HOME: the working folder
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# names the dynamic loader, libc or the interpreter read: refused even though they are set only after
# confinement, so that no path from a caller to the process's start can carry them
_ENV_REFUSED = re.compile(
    r"^(LD_|PYTHON|GCONV_|MALLOC_|GLIBC_|GMON_|LOCPATH$|NLSPATH$|HOSTALIASES$|RES_OPTIONS$|LOCALDOMAIN$"
    r"|TMPDIR$|TZDIR$|PATH$|HOME$)",
    re.IGNORECASE,
)
POLL_S = 0.05  # how often the memory cgroup is checked for OOM kills while a run is live


def check_env(env: dict[str, Any] | None) -> dict[str, str]:
    """Return `env` when every name and value is acceptable, else raise `ValueError` naming the entry.

    `run_python` calls it whatever the entry point, so no caller reaches the launch with `LD_PRELOAD`,
    `PYTHONPATH` or the like.
    """
    if not env:
        return {}
    if len(env) > 64:
        raise ValueError(f"env has {len(env)} variables; at most 64 are allowed")
    out = {}
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name) or _ENV_REFUSED.match(name):
            raise ValueError(
                f"env name {name!r} is not allowed (plain names only; no PATH, HOME, TMPDIR, LD_*, PYTHON*, "
                "or other variables the loader or the interpreter read)"
            )
        if not isinstance(value, str) or len(value) > 4096 or "\0" in value:
            raise ValueError(
                f"env[{name!r}] must be a string of at most 4096 characters without NUL, got {value!r:.40}"
            )
        out[name] = value
    return out


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one run. The defaults suit short agent-written programs."""

    timeout_s: float = 10.0
    memory_mb: int = 256
    max_processes: int = 16
    max_open_files: int = 64
    max_file_mb: int = 16
    tmpfs_mb: int = 64  # the run's writable space: working folder, /tmp, /var/tmp, /dev/shm, /run together
    max_output_bytes: int = 1_000_000

    def rlimits(self) -> dict[str, int]:
        """The rlimits the child sets on itself (names of `resource` constants)."""
        return {
            "RLIMIT_CPU": math.ceil(self.timeout_s) + 1,
            "RLIMIT_AS": self.memory_mb * 1024 * 1024,
            "RLIMIT_NPROC": self.max_processes,
            "RLIMIT_NOFILE": self.max_open_files,
            "RLIMIT_FSIZE": self.max_file_mb * 1024 * 1024,
            "RLIMIT_CORE": 0,
        }


@dataclass
class SandboxRun:
    """The outcome of one run."""

    stdout: str
    stderr: str
    exit_code: int | None
    duration_ms: float
    timed_out: bool
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    isolation: dict[str, Any] = field(default_factory=dict)
    limit_hit: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict the tools return."""
        return {
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
            "duration_ms": round(self.duration_ms, 2),
            "timed_out": self.timed_out,
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
            "isolation": self.isolation,
            "limit_hit": self.limit_hit,
        }


def _world_reachable(path: Path) -> bool:
    """True when users other than the owner can reach `path` (every folder searchable, the file readable)."""
    try:
        for parent in path.parents:
            if not parent.stat().st_mode & stat.S_IXOTH:
                return False
        return bool(path.stat().st_mode & stat.S_IROTH)
    except OSError:
        return False


@cache
def interpreter() -> tuple[str, bool]:
    """The interpreter the sandbox runs, and whether an unprivileged uid can use it.

    `ECHO_SANDBOX_PYTHON` wins. Otherwise the server's own interpreter when others can read it and its
    standard library, else a system Python 3 that they can (the code runs with `-I -S`, stdlib only).
    """
    override = os.environ.get("ECHO_SANDBOX_PYTHON")
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [override] if override else [sys.executable, getattr(sys, "_base_executable", "")]
    if not override:
        candidates += [
            f"/usr/bin/{version}",
            f"/usr/local/bin/{version}",
            "/usr/bin/python3",
            "/usr/local/bin/python3",
        ]
    for candidate in filter(None, candidates):
        real = Path(os.path.realpath(candidate))
        if not real.is_file():
            continue
        libs = list((real.parent.parent / "lib").glob("python3*/os.py"))
        if _world_reachable(real) and libs and all(_world_reachable(lib) for lib in libs[:1]):
            return str(real), True
    return override or sys.executable, False


def _allocate_uid() -> int:
    while True:
        uid = _UID_RANGE[0] + secrets.randbelow(_UID_RANGE[1] - _UID_RANGE[0])
        if uid not in _used_uids:
            _used_uids.add(uid)
            return uid


def _pids_of_uid(uid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", encoding="ascii", errors="replace") as handle:
                for line in handle:
                    if line.startswith("State:") and line.split()[1] in ("Z", "X"):
                        break  # a zombie holds no resources; its new parent reaps it
                    if line.startswith("Uid:"):
                        if int(line.split()[1]) == uid:
                            pids.append(int(entry.name))
                        break
        except (OSError, ValueError):
            continue  # the process ended while we looked
    return pids


def _kill_everything(pgid: int, uid: int | None, cgroup: _cgroup.RunCgroup | None = None) -> int:
    """Kill the run's process group, its cgroup and, when it had its own uid, every process of that uid."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    left = cgroup.kill_all() if cgroup is not None else 0
    if uid is None:
        return left
    for _ in range(100):  # the process cap bounds how many can appear between two sweeps
        pids = _pids_of_uid(uid)
        if not pids:
            return left
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return max(left, len(_pids_of_uid(uid)))


def _read_head(path: Path, cap: int) -> tuple[bytes, bool]:
    """The first `cap` bytes of a captured stream, and whether there was more."""
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    return data[:cap], len(data) > cap


def _read_status(path: Path) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """The bootstrap's report of what it applied, and what its relay saw when the program ended."""
    applied, ended = None, {}
    try:
        for line in path.read_bytes().splitlines()[:2]:
            report = json.loads(line)
            if report.get("ended"):
                ended = report
            else:
                applied = report
    except (OSError, ValueError, AttributeError):
        pass  # a missing or damaged report: nothing is claimed
    return applied, ended


def _prepare(workdir: Path, code: str, files: dict[str, str], uid: int | None) -> None:
    (workdir / "main.py").write_text(code, encoding="utf-8")
    for name, text in files.items():
        target = (workdir / name).resolve()
        if target.parent != workdir.resolve() or name.startswith("."):
            raise ValueError(f"files key {name!r} must be a plain file name inside the working folder")
        target.write_text(text, encoding="utf-8")
    if uid is not None:
        for path in [workdir, *workdir.iterdir()]:
            os.chown(path, uid, uid)
    workdir.chmod(0o700)


async def run_python(
    code: str,
    *,
    stdin: str | None = None,
    limits: SandboxLimits = SandboxLimits(),
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
    argv: list[str] | None = None,
) -> SandboxRun:
    """Run `code` as `main.py` in a fresh confined process and return what it printed.

    The standard streams are files in a folder only the server can open, not pipes: a background process
    that outlives the program cannot hold a pipe open and stall the run, and a flood of output is bounded
    by the file-size rlimit instead of filling the server's memory.

    Args:
        code: the program.
        stdin: text fed to its standard input (empty when None).
        limits: timeout, memory, processes, writable space, output caps.
        env: extra environment variables (nothing is inherited), set after the process is confined.
        files: extra files written next to `main.py` (`{"solution.py": "..."}`).
        argv: `sys.argv[1:]`.

    Raises:
        ValueError: an `env` name or value, or a `files` name, that is not allowed.
    """
    program_env = check_env(env)
    python, reachable = interpreter()
    uid = _allocate_uid() if os.geteuid() == 0 and reachable else None
    workdir = Path(tempfile.mkdtemp(prefix="echo_sbx_"))
    streams = Path(tempfile.mkdtemp(prefix="echo_sbx_io_"))  # 0700, owned by the server
    cgroup: _cgroup.RunCgroup | str = "no cgroup was made"
    started = time.perf_counter()
    proc: asyncio.subprocess.Process | None = None
    try:
        cgroup = _cgroup.create(limits.memory_mb)
        _prepare(workdir, code, files or {}, uid)
        (streams / "stdin").write_text(stdin or "", encoding="utf-8")
        config = {
            "workdir": str(workdir),
            "uid": uid,
            "isolate": True,
            "rlimits": limits.rlimits(),
            "tmpfs_mb": limits.tmpfs_mb,
            "argv": argv or [],
            "env": program_env,
            "cgroup": cgroup.procs_file if isinstance(cgroup, _cgroup.RunCgroup) else None,
        }
        proc = await _start(python, config, streams, workdir)
        watched = cgroup if isinstance(cgroup, _cgroup.RunCgroup) else None
        timed_out, oom = await _wait(proc, limits.timeout_s, watched)
        leftover = _kill_everything(proc.pid, uid, watched)  # background children never outlive the run
        if watched is not None:
            leftover = await watched.drain()
        returncode = await proc.wait()
        oom = oom or (watched is not None and watched.oom_kills() > 0)
        return _collect(
            streams,
            limits,
            python,
            leftover,
            None if timed_out else returncode,
            timed_out,
            started,
            cgroup,
            oom,
        )
    finally:
        if proc is not None and proc.returncode is None:  # cancelled: the executor's timeout fired
            _kill_everything(proc.pid, uid, cgroup if isinstance(cgroup, _cgroup.RunCgroup) else None)
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), 2)  # reap it before the caller moves on
        if isinstance(cgroup, _cgroup.RunCgroup):
            await cgroup.remove()
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(streams, ignore_errors=True)
        if uid is not None:
            _used_uids.discard(uid)


async def _start(
    python: str, config: dict[str, Any], streams: Path, workdir: Path
) -> asyncio.subprocess.Process:
    """The bootstrap started on `config`, its standard streams and status report files in `streams`."""
    with (
        open(streams / "stdin", "rb") as fin,
        open(streams / "stdout", "wb") as fout,
        open(streams / "stderr", "wb") as ferr,
        open(streams / "status", "wb") as fstatus,
    ):
        config = {**config, "status_fd": fstatus.fileno()}
        return await asyncio.create_subprocess_exec(
            python, "-I", "-S", "-c", _BOOTSTRAP, json.dumps(config),
            stdin=fin, stdout=fout, stderr=ferr, cwd=str(workdir), env={**_LAUNCH_ENV, "HOME": str(workdir)},
            start_new_session=True, pass_fds=(fstatus.fileno(),),
        )  # fmt: skip


async def _wait(
    proc: asyncio.subprocess.Process, timeout_s: float, cgroup: _cgroup.RunCgroup | None
) -> tuple[bool, bool]:
    """Wait for the run to end; return (timed out, the memory limit of the run was hit).

    With a cgroup, an OOM kill ends the whole run at once: the kernel kills one process, and the rest of
    the run must not go on as if nothing happened.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    waiter = asyncio.ensure_future(proc.wait())
    try:
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return True, False
            done, _ = await asyncio.wait({waiter}, timeout=min(remaining, POLL_S) if cgroup else remaining)
            if done:
                return False, False
            if cgroup is not None and cgroup.oom_kills() > 0:
                return False, True
    finally:
        waiter.cancel()


def _collect(
    streams: Path,
    limits: SandboxLimits,
    python: str,
    leftover: int,
    exit_code: int | None,
    timed_out: bool,
    started: float,
    cgroup: _cgroup.RunCgroup | str,
    oom: bool,
) -> SandboxRun:
    out, out_cut = _read_head(streams / "stdout", limits.max_output_bytes)
    err, err_cut = _read_head(streams / "stderr", limits.max_output_bytes)
    applied, ended = _read_status(streams / "status")
    isolation = applied or {"error": "the sandbox bootstrap did not start; nothing was confined"}
    isolation.update(
        interpreter=python,
        leftover_processes=leftover,
        memory=_memory_claim(limits, cgroup, isolation.pop("cgroup", None)),
    )
    limit_hit = _limit_hit(streams, limits, ended, oom)
    text = err.decode("utf-8", errors="replace")
    if limit_hit:
        text += ("" if not text or text.endswith("\n") else "\n") + f"echo-sandbox: {limit_hit}\n"
    return SandboxRun(
        stdout=out.decode("utf-8", errors="replace"),
        stderr=text,
        exit_code=exit_code,
        duration_ms=(time.perf_counter() - started) * 1000,
        timed_out=timed_out,
        stdout_truncated=out_cut,
        stderr_truncated=err_cut,
        isolation=isolation,
        limit_hit=limit_hit,
    )


def _memory_claim(limits: SandboxLimits, cgroup: _cgroup.RunCgroup | str, joined: str | None) -> str:
    """What really bounded the run's memory: the run's cgroup, or only the per-process rlimit."""
    mb = limits.memory_mb
    if isinstance(cgroup, _cgroup.RunCgroup) and joined == "joined":
        return (
            f"run: {mb} MB for all the run's processes together (memory cgroup v{cgroup.version}, no swap); "
            f"each process also at most {mb} MB of address space"
        )
    why = cgroup if isinstance(cgroup, str) else f"the run did not join its cgroup: {joined or 'no report'}"
    return (
        f"per process only: each of up to {limits.max_processes} processes may use {mb} MB of address "
        f"space, {mb * limits.max_processes} MB in all ({why})"
    )


def _limit_hit(streams: Path, limits: SandboxLimits, ended: dict[str, Any], oom: bool) -> str | None:
    """A sentence naming the limit that stopped the run, or None."""
    if oom:
        return (
            f"the run was killed: its processes together went over the memory limit of the run "
            f"({limits.memory_mb} MB, memory_mb)"
        )
    if ended.get("writable_full"):
        return (
            f"the writable space of the run ({limits.tmpfs_mb} MB for the working folder, /tmp, /var/tmp, "
            "/dev/shm and /run together) is full: writes failed with 'No space left on device'"
        )
    cap = limits.max_file_mb * 1024 * 1024
    for name in ("stdout", "stderr"):
        with contextlib.suppress(OSError):
            if (streams / name).stat().st_size >= cap:
                return (
                    f"{name} reached the file size limit of {limits.max_file_mb} MB "
                    "(max_file_mb; writes failed with 'File too large')"
                )
    return None
