"""Run Python code in a separate, confined process: the engine behind code_executor and code_tester.

What is isolated (each item is checked at run time and reported in `SandboxRun.isolation`, never assumed):

- Process: the program runs as PID 2 of its own PID namespace under a tiny init (where the kernel allows
  namespaces), with its own /proc that shows only the run's processes; when the program ends the init
  exits and the kernel kills everything left in the namespace. On top, a new session and process group
  killed on exit or timeout, and, when the run has its own uid, every process left with that uid.
- Limits (rlimits): CPU seconds, address space (memory), processes (RLIMIT_NPROC, effective because the run
  has its own uid), open files, size of any file written, no core dumps. Wall-clock timeout on top.
- User (when the server runs as root and a world-readable interpreter exists): the code runs as a fresh
  unprivileged uid, so it cannot write files the host's users own, read root-only files (0600, /root) or
  read other processes' environment; no_new_privs stops set-uid programs from regaining privileges.
- Network (when the kernel allows new namespaces): an empty network namespace, no interface up.
- Temp space: private tmpfs on /tmp, /var/tmp and /dev/shm (size-capped), discarded after the run; the
  working directory is a fresh folder removed afterwards.
- Environment: empty except PATH, HOME (the working dir), LANG and what the caller passes explicitly.
- Output: stdin, stdout and stderr are files in a folder only the server can open; the file-size rlimit
  stops a flood (the program gets "File too large"), and the first `max_output_bytes` are returned.

What is NOT isolated: world-readable files on the host can be read (source trees, /etc); world-writable
folders other than the temp ones can be written; total disk use in the working folder is bounded only per
file; the kernel is shared (no seccomp filter, no VM). Treat this as containment for agent-written code
and mistakes, not as a boundary against a determined attacker with a kernel exploit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
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

_BOOTSTRAP = (Path(__file__).parent / "_bootstrap.py").read_text(encoding="utf-8")
_MARKER = b"\x1eECHO-SANDBOX "
_UID_RANGE = (1_000_000, 1_900_000)  # far above distribution and container uid ranges
_used_uids: set[int] = set()


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one run. The defaults suit short agent-written programs."""

    timeout_s: float = 10.0
    memory_mb: int = 256
    max_processes: int = 16
    max_open_files: int = 64
    max_file_mb: int = 16
    tmpfs_mb: int = 64
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


def _kill_everything(pgid: int, uid: int | None) -> int:
    """Kill the run's process group and, when it had its own uid, every process of that uid."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    if uid is None:
        return 0
    for _ in range(100):  # the process cap bounds how many can appear between two sweeps
        pids = _pids_of_uid(uid)
        if not pids:
            return 0
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return len(_pids_of_uid(uid))


def _read_head(path: Path, cap: int) -> tuple[bytes, bool]:
    """The first `cap` bytes of a captured stream, and whether there was more."""
    with open(path, "rb") as handle:
        data = handle.read(cap + 1)
    return data[:cap], len(data) > cap


def _split_status(stderr: bytes) -> tuple[dict[str, Any] | None, bytes]:
    if not stderr.startswith(_MARKER):
        return None, stderr
    line, _, rest = stderr.partition(b"\n")
    try:
        return json.loads(line[len(_MARKER) :]), rest
    except ValueError:
        return None, stderr


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
        limits: timeout, memory, processes, output caps.
        env: extra environment variables, passed explicitly (nothing is inherited).
        files: extra files written next to `main.py` (`{"solution.py": "..."}`).
        argv: `sys.argv[1:]`.
    """
    python, reachable = interpreter()
    uid = _allocate_uid() if os.geteuid() == 0 and reachable else None
    workdir = Path(tempfile.mkdtemp(prefix="echo_sbx_"))
    streams = Path(tempfile.mkdtemp(prefix="echo_sbx_io_"))  # 0700, owned by the server
    started = time.perf_counter()
    proc: asyncio.subprocess.Process | None = None
    try:
        _prepare(workdir, code, files or {}, uid)
        (streams / "stdin").write_text(stdin or "", encoding="utf-8")
        config = {
            "workdir": str(workdir),
            "uid": uid,
            "isolate": True,
            "rlimits": limits.rlimits(),
            "tmpfs_mb": limits.tmpfs_mb,
            "argv": argv or [],
        }
        child_env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(workdir),
            "LANG": "C.UTF-8",
            **(env or {}),
        }
        with (
            open(streams / "stdin", "rb") as fin,
            open(streams / "stdout", "wb") as fout,
            open(streams / "stderr", "wb") as ferr,
        ):
            proc = await asyncio.create_subprocess_exec(
                python, "-I", "-S", "-c", _BOOTSTRAP, json.dumps(config),
                stdin=fin, stdout=fout, stderr=ferr, cwd=str(workdir), env=child_env, start_new_session=True,
            )  # fmt: skip
        try:
            await asyncio.wait_for(proc.wait(), limits.timeout_s)
            timed_out = False
        except TimeoutError:
            timed_out = True
        leftover = _kill_everything(proc.pid, uid)  # background children never outlive the run
        returncode = await proc.wait()
        return _collect(
            streams, limits, python, leftover, None if timed_out else returncode, timed_out, started
        )
    finally:
        if proc is not None and proc.returncode is None:  # cancelled: the executor's timeout fired
            _kill_everything(proc.pid, uid)
            with contextlib.suppress(TimeoutError, ProcessLookupError):
                await asyncio.wait_for(proc.wait(), 2)  # reap it before the caller moves on
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(streams, ignore_errors=True)
        if uid is not None:
            _used_uids.discard(uid)


def _collect(
    streams: Path,
    limits: SandboxLimits,
    python: str,
    leftover: int,
    exit_code: int | None,
    timed_out: bool,
    started: float,
) -> SandboxRun:
    out, out_cut = _read_head(streams / "stdout", limits.max_output_bytes)
    err, err_cut = _read_head(streams / "stderr", limits.max_output_bytes + 4096)
    status, err = _split_status(err)
    if len(err) > limits.max_output_bytes:
        err, err_cut = err[: limits.max_output_bytes], True
    isolation = status or {"error": "the sandbox bootstrap did not start; nothing was confined"}
    isolation.update(interpreter=python, leftover_processes=leftover)
    return SandboxRun(
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        exit_code=exit_code,
        duration_ms=(time.perf_counter() - started) * 1000,
        timed_out=timed_out,
        stdout_truncated=out_cut,
        stderr_truncated=err_cut,
        isolation=isolation,
    )
