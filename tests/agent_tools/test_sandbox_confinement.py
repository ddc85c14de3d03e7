"""Attacks on the sandbox's edges (issue 11, findings 1 and 7), each against the real sandbox.

Every test here is an attack that worked before the fix: a loader variable passed straight to
`run_python`, a module that ran code when imported, several processes that together exceeded `memory_mb`,
System V shared memory that outlived the run, host Unix sockets reached from an "isolated" run, and a run
that filled the host's disk.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from echo_tools.sandbox import SandboxLimits, check_env, interpreter, run_python
from tests.agent_tools._support import REPO_ROOT


def _preload_library(tmp_path: Path) -> tuple[Path, Path]:
    """A real shared library whose constructor writes a marker file: proof that the loader ran it."""
    marker = tmp_path / "preload-ran.txt"
    source = tmp_path / "preload.c"
    source.write_text(
        "#include <stdio.h>\n"
        "__attribute__((constructor)) static void ran(void) {\n"
        f'    FILE *f = fopen("{marker}", "a");\n'
        '    if (f) { fputs("ran\\n", f); fclose(f); }\n'
        "}\n"
    )
    library = tmp_path / "preload.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library, marker


async def test_a_loader_variable_given_to_run_python_directly_never_reaches_the_launch(tmp_path):
    library, marker = _preload_library(tmp_path)
    subprocess.run(["/bin/true"], env={"LD_PRELOAD": str(library)}, check=True)
    assert marker.read_text() == "ran\n"  # the library works: any launch that honours it writes the marker
    marker.unlink()
    with pytest.raises(ValueError) as info:
        await run_python("print('hi')", env={"LD_PRELOAD": str(library)})
    assert "env name 'LD_PRELOAD' is not allowed" in str(info.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    "name", ["LD_PRELOAD", "LD_LIBRARY_PATH", "ld_audit", "PYTHONPATH", "PYTHONHOME", "GCONV_PATH",
             "MALLOC_CHECK_", "GLIBC_TUNABLES", "LOCPATH", "PATH", "HOME", "A=B", "", "1X"],
)  # fmt: skip
def test_run_python_refuses_every_name_the_loader_or_interpreter_reads(name):
    with pytest.raises(ValueError) as info:
        check_env({name: "x"})
    assert f"env name {name!r} is not allowed" in str(info.value)


async def test_the_caller_environment_is_applied_after_confinement_not_at_the_launch():
    code = (
        "import ctypes, os\n"
        "ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)\n"  # PR_SET_DUMPABLE: let the run's uid read its own /proc
        "launch = open('/proc/self/environ', 'rb').read().split(b'\\0')\n"
        "print(sorted(v.split(b'=')[0].decode() for v in launch if v))\n"
        "print(os.environ['GREETING'])\n"
    )
    run = await run_python(code, env={"GREETING": "hello"})
    launch_names, greeting = run.stdout.splitlines()
    assert ast.literal_eval(launch_names) == ["HOME", "LANG", "PATH"]  # what the launch itself saw
    assert greeting == "hello"


_IMPORT_EVERY_MODULE = """
import os, pkgutil, sys
sys.argv = ["x", "{}"]  # what the bootstrap would read as its configuration
before = os.getuid(), os.readlink("/proc/self/ns/net"), os.readlink("/proc/self/ns/mnt")
import AgentTools, echo_tools.sandbox
names = [m.name for m in pkgutil.walk_packages(AgentTools.__path__, "AgentTools.")]
names += [m.name for m in pkgutil.walk_packages(echo_tools.sandbox.__path__, "echo_tools.sandbox.")]
for name in names:
    __import__(name)
    after = os.getuid(), os.readlink("/proc/self/ns/net"), os.readlink("/proc/self/ns/mnt")
    assert after == before, (name, before, after)
print(len(names), "imported", " ".join(names))
"""


def test_importing_any_agenttools_or_sandbox_module_runs_nothing_from_the_working_folder(tmp_path):
    # the folder holds what the tester's runner and the bootstrap would run: main.py, solution.py, cases
    marker = tmp_path / "code-ran.txt"
    payload = f"open({str(marker)!r}, 'a').write('ran')\n"
    (tmp_path / "solution.py").write_text(payload)
    (tmp_path / "main.py").write_text(payload)
    (tmp_path / "cases.json").write_text('{"test_cases": [], "test_code": null}')
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_EVERY_MODULE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    count, _, names = done.stdout.split(" ", 2)
    assert int(count) > 30
    assert "AgentTools.code_tester.runner" in names.split()
    assert "echo_tools.sandbox._bootstrap" in names.split()
    assert not marker.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.json", "main.py", "solution.py"]


async def test_processes_that_together_exceed_memory_mb_kill_the_run():
    # eight children each write 300 MB and report it; the parent says so only when all eight held theirs
    code = (
        "import os\n"
        "ready_r, ready_w = os.pipe()\n"
        "go_r, go_w = os.pipe()\n"
        "for _ in range(8):\n"
        "    if os.fork() == 0:\n"
        "        block = b'x' * (300 << 20)\n"
        "        os.write(ready_w, b'.')\n"
        "        os.read(go_r, 1)\n"
        "        os._exit(0)\n"
        "held = 0\n"
        "while held < 8:\n"
        "    held += len(os.read(ready_r, 8))\n"
        "print('all 8 children held 300 MB', flush=True)\n"
        "os.write(go_w, b'x' * 8)\n"
    )
    run = await run_python(code, limits=SandboxLimits(memory_mb=512, timeout_s=30))
    assert run.isolation["memory"].startswith("run:"), run.isolation
    assert "all 8 children" not in run.stdout
    assert run.timed_out is False
    assert run.limit_hit is not None and "memory limit of the run (512 MB" in run.limit_hit
    assert "memory limit of the run (512 MB" in run.stderr  # the program's reader sees why, too
    assert run.exit_code == -9
    assert run.isolation["leftover_processes"] == 0


async def test_a_run_within_memory_mb_is_not_reported_as_over_the_limit():
    code = "import os\nfor _ in range(3):\n    if os.fork() == 0:\n        b = b'x' * (50 << 20)\n        os._exit(0)\n    os.wait()\nprint('ok')"
    run = await run_python(code, limits=SandboxLimits(memory_mb=256))
    assert run.stdout == "ok\n" and run.exit_code == 0
    assert run.limit_hit is None


def _host_shm_keys() -> str:
    return subprocess.run(["ipcs", "-m"], capture_output=True, text=True, check=True).stdout


async def test_system_v_shared_memory_made_in_a_run_does_not_outlive_it():
    key = 0x5EC00000 + secrets.randbelow(0xFFFF)
    code = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"shmid = libc.shmget({key}, 1 << 20, 0o1000 | 0o666)\n"  # IPC_CREAT, readable by all
        "print('made' if shmid >= 0 else f'failed {ctypes.get_errno()}')\n"
    )
    try:
        run = await run_python(code)
        assert run.stdout == "made\n", run.stderr
        assert f"0x{key:08x}" not in _host_shm_keys()
        assert run.isolation["ipc"].startswith("isolated")
    finally:  # on a sandbox without an IPC namespace the segment is the host's: remove it
        subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)


def _unix_server(path: str) -> tuple[socket.socket, list[bool]]:
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    if not path.startswith("\0"):
        os.chmod(path, 0o777)  # anyone may connect: only the sandbox's own walls can refuse
    server.listen()
    accepted: list[bool] = []

    def serve() -> None:
        try:
            conn, _ = server.accept()
            accepted.append(True)
            conn.close()
        except OSError:
            pass  # closed by the test

    threading.Thread(target=serve, daemon=True).start()
    return server, accepted


@pytest.mark.parametrize("where", ["/run", "/tmp", "/var/run", "abstract"])
async def test_host_unix_sockets_are_unreachable_from_a_run(where):
    name = f"echo_sbx_sock_{os.getpid()}_{secrets.token_hex(4)}"
    folder = None
    if where == "abstract":
        path = "\0" + name
    else:
        folder = Path(where) / name
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
        path = str(folder / "s.sock")
    server, accepted = _unix_server(path)
    try:
        code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({path!r})\nprint('connected')\n"
        run = await run_python(code)
        assert "connected" not in run.stdout
        assert "FileNotFoundError" in run.stderr or "ConnectionRefusedError" in run.stderr, run.stderr
        assert accepted == []
        assert run.isolation["unix_sockets"].startswith("isolated"), run.isolation
    finally:
        server.close()
        if folder is not None:
            Path(path).unlink(missing_ok=True)
            folder.rmdir()


async def test_writing_beyond_the_runs_space_stops_with_an_error_naming_the_limit(tmp_path):
    # 40 files of 4 MB: each is under the per-file limit, together they are five times the run's space
    code = (
        "import sys\n"
        "written = 0\n"
        "try:\n"
        "    for i in range(40):\n"
        "        with open(f'/tmp/f{i}' if i % 2 else f'f{i}', 'wb') as out:\n"
        "            out.write(b'x' * (4 << 20))\n"
        "        written += 4\n"
        "except OSError as exc:\n"
        "    print('stopped after', written, 'MB:', exc.strerror)\n"
        "    sys.exit(1)\n"
    )
    run = await run_python(code, limits=SandboxLimits(tmpfs_mb=32, max_file_mb=8))
    assert run.isolation["writable"].startswith("run:"), run.isolation
    assert run.stdout.startswith("stopped after") and "No space left on device" in run.stdout
    assert int(run.stdout.split()[2]) < 32
    assert run.limit_hit is not None and "writable space of the run (32 MB" in run.limit_hit
    assert "writable space of the run (32 MB" in run.stderr


async def test_an_output_flood_is_reported_as_the_file_size_limit():
    code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"
    run = await run_python(code, limits=SandboxLimits(max_file_mb=2))
    assert run.limit_hit is not None and "file size limit of 2 MB" in run.limit_hit


def test_a_server_that_cannot_make_a_cgroup_says_memory_is_limited_per_process_only(tmp_path):
    # the server runs as an unprivileged uid (no cgroup can be made), with a Python every user can run
    python, reachable = interpreter()
    assert reachable
    code = (
        "import os\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        block = b'x' * (100 << 20)\n"
        "        os._exit(0)\n"
        "print(sum(os.waitstatus_to_exitcode(os.wait()[1]) == 0 for _ in range(4)), 'children done')\n"
    )
    script = (
        "import asyncio, json\n"
        "from sandbox import SandboxLimits, run_python\n"  # the engine alone: the system python has no pydantic
        f"run = asyncio.run(run_python({code!r}, limits=SandboxLimits(memory_mb=150)))\n"
        "print(json.dumps(run.to_dict()))\n"
    )
    uid = 1_950_000 + secrets.randbelow(10_000)  # above the sandbox's own range: no process has it
    done = subprocess.run(
        [python, "-I", "-c", f"import sys; sys.path.insert(0, {str(REPO_ROOT / 'echo_tools')!r})\n{script}"],
        user=uid,
        group=uid,
        extra_groups=[],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    memory = result["isolation"]["memory"]
    assert memory.startswith("per process only: each of up to 16 processes may use 150 MB"), memory
    assert "cannot make a cgroup" in memory
    assert result["stdout"] == "4 children done\n"  # 400 MB in all: the report did not overclaim
    assert result["limit_hit"] is None


_NO_UNSHARE = """
import ctypes, platform, struct
nr, arch = {"x86_64": (272, 0xC000003E), "aarch64": (97, 0xC00000B7)}[platform.machine()]
ops = [(0x20, 0, 0, 4), (0x15, 0, 3, arch), (0x20, 0, 0, 0), (0x15, 0, 1, nr),
       (0x06, 0, 0, 0x00050000 | 1), (0x06, 0, 0, 0x7FFF0000)]  # unshare() fails with EPERM
code = b"".join(struct.pack("HBBI", *op) for op in ops)
buf = ctypes.create_string_buffer(code)
prog = struct.pack("HxxxxxxQ", len(ops), ctypes.addressof(buf))
assert ctypes.CDLL(None).prctl(22, 2, ctypes.c_char_p(prog), 0, 0) == 0  # PR_SET_SECCOMP, FILTER
"""


def test_without_namespaces_the_report_says_nothing_is_isolated_and_that_is_true(tmp_path):
    # a kernel that refuses unshare(): the server (root, in a subprocess) runs under a seccomp filter
    key = 0x5EC10000 + secrets.randbelow(0xFFFF)
    marker = f"echo_sbx_shared_{os.getpid()}_{secrets.token_hex(4)}"
    code = (
        "import ctypes\n"
        f"print(ctypes.CDLL(None).shmget({key}, 4096, 0o1000 | 0o600) >= 0)\n"
        f"open('/tmp/{marker}', 'w').write('x')\n"
    )
    script = (
        f"{_NO_UNSHARE}\nimport asyncio, json\n"
        "from echo_tools.sandbox import run_python\n"
        f"print(json.dumps(asyncio.run(run_python({code!r})).to_dict()))\n"
    )
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(REPO_ROOT)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        isolation = result["isolation"]
        assert result["stdout"] == "True\n", result["stderr"]
        assert isolation["network"] == "not isolated: unshare failed (Operation not permitted)"
        assert isolation["ipc"].startswith("shared with the host")
        assert f"0x{key:08x}" in _host_shm_keys()  # and so it is: the segment outlived the run
        assert isolation["tmp"] == "shared with the host"
        assert isolation["unix_sockets"].startswith("not isolated")
        assert isolation["writable"].startswith("not bounded as a whole")
        assert Path("/tmp", marker).exists()  # the run wrote into the host's /tmp, as reported
        assert isolation["processes"].startswith("shared PID namespace")
    finally:
        subprocess.run(["ipcrm", "-M", str(key)], capture_output=True)
        Path("/tmp", marker).unlink(missing_ok=True)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GREETING": "a\0b"}, "env['GREETING'] must be a string of at most 4096 characters without NUL"),
        ({"GREETING": 3}, "env['GREETING'] must be a string of at most 4096 characters without NUL, got 3"),
        ({"GREETING": "x" * 4097}, "env['GREETING'] must be a string of at most 4096 characters"),
        ({f"V{i}": "x" for i in range(65)}, "env has 65 variables; at most 64 are allowed"),
    ],
)
async def test_run_python_refuses_bad_env_values_naming_the_variable(env, message):
    with pytest.raises(ValueError) as info:
        await run_python("print(1)", env=env)
    assert message in str(info.value)
