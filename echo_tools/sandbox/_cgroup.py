"""A memory cgroup per sandbox run, so that `memory_mb` bounds all of a run's processes together.

It is made inside the server's own memory cgroup (the host's limits keep applying), with the v1 memory
controller or cgroup v2, whichever holds the memory controller on this kernel. The bootstrap joins it
before it forks anything, so every process of the run is in it; the server watches it for OOM kills,
kills every process in it and removes it when the run ends. Without a usable memory controller (not root,
no cgroup file system, a v2 parent with processes of its own) `create` says why, and the run falls back to
the per-process address-space limit, which the isolation report then states.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunCgroup:
    """The cgroup of one run."""

    path: Path
    version: int
    limit_mb: int

    @property
    def procs_file(self) -> str:
        """The file a process writes its pid to in order to join."""
        return str(self.path / "cgroup.procs")

    def oom_kills(self) -> int:
        """How many processes of the run the kernel killed for going over the limit."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def pids(self) -> list[int]:
        """The processes in the cgroup now."""
        try:
            return [int(pid) for pid in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def kill_all(self) -> int:
        """SIGKILL every process of the run; return how many were still there after repeated sweeps."""
        for _ in range(10):  # the process cap bounds how many can appear between two sweeps
            pids = self.pids()
            if not pids:
                return 0
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        return len(self.pids())

    async def drain(self) -> int:
        """Kill every process and wait (bounded) until the kernel has taken them out; return how many stay.

        A killed process leaves the cgroup only when it has finished exiting, which takes a moment for one
        that holds hundreds of MB.
        """
        for _ in range(300):
            if not self.kill_all() and not self.pids():
                return 0
            await asyncio.sleep(0.01)  # bounded by the loop
        return len(self.pids())

    async def remove(self) -> None:
        """Kill what is left and remove the cgroup."""
        await self.drain()
        with contextlib.suppress(OSError):  # gone already, or a process the kernel could not end
            self.path.rmdir()


def _own_memory_folder() -> tuple[Path, int] | str:
    """The folder of the server's own memory cgroup and the cgroup version, or why there is none."""
    try:
        membership = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError as exc:
        return f"cannot read the server's cgroups ({exc.strerror})"
    own: dict[str, str] = {}
    for line in membership:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else ["<v2>"]:
            own[controller] = path
    for mount in mounts:
        left, _, right = mount.partition(" - ")
        fields, kind = left.split(), right.split()
        if len(fields) < 5 or len(kind) < 3:
            continue
        root, mountpoint, fstype, options = fields[3], fields[4], kind[0], kind[2].split(",")
        if fstype == "cgroup" and "memory" in options and "memory" in own:
            version, path = 1, own["memory"]
        elif fstype == "cgroup2" and "<v2>" in own:
            version, path = 2, own["<v2>"]
        else:
            continue
        relative = path[len(root) :] if root != "/" and path.startswith(root) else path
        folder = Path(mountpoint) / relative.lstrip("/")
        if version == 2:
            try:
                if "memory" not in (Path(mountpoint) / "cgroup.controllers").read_text().split():
                    continue  # a v2 hierarchy without the memory controller (it is bound to v1)
            except OSError:
                continue
        if folder.is_dir():
            return folder, version
    return "no cgroup hierarchy with the memory controller is mounted"


def create(limit_mb: int) -> RunCgroup | str:
    """A new cgroup limited to `limit_mb` of memory (and no swap), or a sentence saying why not."""
    found = _own_memory_folder()
    if isinstance(found, str):
        return found
    parent, version = found
    path = parent / f"echo_sbx_{secrets.token_hex(6)}"
    limit = str(limit_mb * 1024 * 1024)
    try:
        if version == 2 and "memory" not in (parent / "cgroup.subtree_control").read_text().split():
            (parent / "cgroup.subtree_control").write_text("+memory")
        path.mkdir()
    except OSError as exc:
        return f"cannot make a cgroup under {parent} ({exc.strerror})"
    try:
        if version == 1:
            (path / "memory.limit_in_bytes").write_text(limit)
            settings = [("memory.memsw.limit_in_bytes", limit)]  # memory + swap: swapping is no way round
        else:
            (path / "memory.max").write_text(limit)
            settings = [("memory.swap.max", "0"), ("memory.oom.group", "1")]
        for name, value in settings:
            if (path / name).exists():
                (path / name).write_text(value)
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.rmdir()
        return f"cannot set the memory limit in {path} ({exc.strerror})"
    return RunCgroup(path, version, limit_mb)
