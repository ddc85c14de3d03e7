"""The code_executor sandbox: real subprocesses, real limits, and an honest isolation report."""

from __future__ import annotations

import ast
import os
import re
import socket
import tempfile
import threading
import time
from pathlib import Path

import pytest

from AgentTools.code_executor.service import CodeExecutorService
from echo_tools.models import ToolContext
from echo_tools.sandbox import SandboxLimits, _pids_of_uid, run_python
from tests.agent_tools._support import discovered_registry, invoke


def _run_uid(isolation: dict) -> int | None:
    match = re.match(r"uid (\d+)", isolation.get("user", ""))
    return int(match.group(1)) if match else None


def _sandbox_processes() -> list[int]:
    """Live (not zombie) processes started by the sandbox, after a bounded wait for killed ones to exit."""
    deadline = time.monotonic() + 5
    while True:
        found = []
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                state = Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[0]
                if (
                    state not in ("Z", "X")
                    and b"echo_sbx_" in Path(f"/proc/{entry.name}/cmdline").read_bytes()
                ):
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.02)  # SIGKILL is delivered asynchronously; bounded by the deadline above


def test_a_program_runs_and_returns_stdout_stderr_and_exit_code():
    result = invoke(
        "tool_code_executor",
        {
            "code": "import sys\nprint(input().upper())\nprint('warn', file=sys.stderr)\nsys.exit(3)",
            "stdin": "hi",
        },
    )
    assert result.success, result.error
    out = result.output
    assert out["stdout"] == "HI\n"
    assert out["stderr"] == "warn\n"
    assert out["exit_code"] == 3
    assert out["timed_out"] is False
    assert out["duration_ms"] > 0


def test_an_exception_is_a_normal_result_with_a_traceback_naming_main_py():
    result = invoke("Code Executor", {"code": "def f():\n    1 / 0\nf()"})
    assert result.success
    assert result.output["exit_code"] == 1
    assert 'File "main.py", line 2, in f' in result.output["stderr"]
    assert "ZeroDivisionError" in result.output["stderr"]
    assert "<string>" not in result.output["stderr"]  # the bootstrap frame is hidden


async def test_an_infinite_loop_is_killed_at_the_timeout():
    run = await run_python("while True:\n    pass", limits=SandboxLimits(timeout_s=0.3))
    assert run.timed_out is True
    assert run.exit_code is None
    assert run.isolation["leftover_processes"] == 0


async def test_a_memory_bomb_is_stopped_by_the_address_space_limit():
    run = await run_python(
        "chunks = []\nwhile True:\n    chunks.append(bytearray(50_000_000))",
        limits=SandboxLimits(memory_mb=128),
    )
    assert run.timed_out is False
    assert run.exit_code != 0
    assert "MemoryError" in run.stderr
    assert run.isolation["rlimits"]["RLIMIT_AS"] == 128 * 1024 * 1024


async def test_a_fork_bomb_is_capped_and_every_process_is_gone_afterwards():
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    run = await run_python(code, limits=SandboxLimits(timeout_s=0.5, max_processes=16))
    assert run.timed_out is True
    assert run.isolation["leftover_processes"] == 0
    uid = _run_uid(run.isolation)
    if uid is not None:  # the run had its own uid: RLIMIT_NPROC counted only its processes
        assert _pids_of_uid(uid) == []
    assert _sandbox_processes() == []


async def test_a_background_process_that_escapes_the_session_does_not_outlive_the_run():
    code = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(60)\nprint('parent done')"
    run = await run_python(code)
    assert run.stdout == "parent done\n"
    assert run.timed_out is False and run.exit_code == 0
    assert _sandbox_processes() == []


async def test_environment_variables_of_the_server_are_not_visible(monkeypatch):
    monkeypatch.setenv("ECHO_TEST_SECRET", "hunter2-very-secret")
    code = (
        "import os\nprint(sorted(os.environ))\n"
        "try:\n    print(open(f'/proc/{os.getppid()}/environ', 'rb').read())\nexcept OSError as e:\n    print('denied', e.errno)\n"
    )
    run = await run_python(code, env={"GREETING": "hello"})
    assert "hunter2" not in run.stdout
    assert "ECHO_TEST_SECRET" not in run.stdout
    assert "'GREETING'" in run.stdout
    names = ast.literal_eval(run.stdout.splitlines()[0])
    assert set(names) == {"PATH", "HOME", "LANG", "GREETING"}


async def test_the_server_environment_cannot_be_read_through_proc(monkeypatch):
    monkeypatch.setenv("ECHO_TEST_SECRET", "hunter2-very-secret")
    code = f"print(open('/proc/{os.getpid()}/environ', 'rb').read())"
    run = await run_python(code)
    assert "hunter2" not in run.stdout
    if "/proc shows only the run's processes" in run.isolation["processes"]:
        assert "FileNotFoundError" in run.stderr  # the server's pid does not exist in the run's /proc
    elif _run_uid(run.isolation) is not None:
        assert "PermissionError" in run.stderr  # visible, but owned by another uid


async def test_the_program_is_pid_2_under_its_own_init_and_sees_only_its_processes():
    code = "import os\nprint(os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    run = await run_python(code)
    if run.isolation["processes"].startswith("isolated"):
        assert run.stdout == "2 [1, 2]\n"
    else:
        assert run.isolation["processes"].startswith("shared PID namespace")


async def test_signals_and_exit_codes_reach_the_caller_unchanged():
    killed = await run_python("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)")
    assert killed.exit_code == -15 and killed.timed_out is False
    exited = await run_python("import sys\nsys.exit(7)")
    assert exited.exit_code == 7


async def test_files_outside_the_work_dir_are_refused_or_contained(tmp_path):
    # tmp_path stands for a host folder the run must not write into: owned by root, not writable by others
    host_folder = tmp_path / "host"
    host_folder.mkdir(mode=0o755)
    marker = f"echo_sbx_escape_{os.getpid()}.txt"
    code = (
        f"import os\nopen('/tmp/{marker}', 'w').write('x')\nprint('tmp ok')\n"
        f"open('inside.txt', 'w').write('fine')\nprint('workdir ok')\n"
        f"open({str(host_folder / marker)!r}, 'w').write('x')\n"
    )
    run = await run_python(code)
    assert "workdir ok" in run.stdout
    assert run.isolation["tmp"].startswith("private"), run.isolation
    assert "tmp ok" in run.stdout
    assert not Path(tempfile.gettempdir(), marker).exists()  # contained in the run's own tmpfs
    # refused (the run's uid owns nothing there), or contained: the run's private /tmp has no such folder
    assert "PermissionError" in run.stderr or (
        "FileNotFoundError" in run.stderr and str(host_folder).startswith(tempfile.gettempdir())
    )
    assert not (host_folder / marker).exists()


async def test_the_work_dir_is_fresh_and_removed_afterwards():
    run = await run_python("import os\nprint(os.getcwd())\nprint(sorted(os.listdir('.')))")
    cwd, listing = run.stdout.splitlines()
    assert listing == "['main.py']"
    assert not Path(cwd).exists()


async def test_the_network_is_unreachable_when_the_report_says_isolated():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    accepted: list[bool] = []
    thread = threading.Thread(target=lambda: accepted.append(bool(server.accept())), daemon=True)
    thread.start()
    try:
        code = (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)\nprint('connected')"
        )
        run = await run_python(code)
        if run.isolation["network"].startswith("isolated"):
            assert "connected" not in run.stdout
            assert "OSError" in run.stderr or "unreachable" in run.stderr.lower()
            assert accepted == []
        else:
            assert run.isolation["network"].startswith("not isolated")
    finally:
        server.close()


async def test_output_beyond_the_cap_is_truncated_and_flagged():
    run = await run_python("print('x' * 100_000)", limits=SandboxLimits(max_output_bytes=1000))
    assert len(run.stdout) == 1000
    assert run.stdout_truncated is True
    assert run.exit_code == 0


def test_the_executor_timeout_kills_the_subprocess():
    result = invoke(
        "tool_code_executor",
        {"code": "while True:\n    pass", "timeout_seconds": 30},
        context=ToolContext(timeout_ms=300),
    )
    assert not result.success
    assert result.error_type == "timeout"
    assert _sandbox_processes() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"code": "print(1)", "language": "ruby"}, "language 'ruby' is not supported"),
        ({"code": "   "}, "code is empty"),
        ({"code": "print(1)", "env": {"LD_PRELOAD": "/x.so"}}, "env name 'LD_PRELOAD' is not allowed"),
        ({"code": "print(1)", "timeout_seconds": 600}, "timeout_seconds must be in (0, 60], got 600"),
        ({"code": "print(1)", "memory_mb": 4}, "memory_mb must be between 32 and 2048, got 4"),
        ({"code": "x = 1\n" * 40_000}, "code is 240000 characters long; at most 200000"),
        ({"code": "print(1)", "stdin": "x" * 1_000_001}, "stdin is 1000001 characters long"),
    ],
)
async def test_bad_input_is_a_value_error_naming_the_field(kwargs, message):
    with pytest.raises(ValueError) as info:
        await CodeExecutorService().execute(**kwargs)
    assert message in str(info.value)


def test_schema_violations_are_refused_by_the_executor_before_running():
    result = invoke("tool_code_executor", {"code": "print(1)", "timeout_seconds": 0})
    assert not result.success and result.error_type == "validation"
    assert "timeout_seconds" in result.error
    assert discovered_registry().require("tool_code_executor").permissions[0].value == "shell:execute"


async def test_an_output_flood_stops_at_the_file_size_limit_and_is_truncated():
    code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)"
    run = await run_python(code, limits=SandboxLimits(max_file_mb=4, timeout_s=10))
    assert run.timed_out is False
    assert run.exit_code == 1 and "File too large" in run.stderr
    assert run.stdout_truncated is True and len(run.stdout) == SandboxLimits().max_output_bytes


async def test_large_stdin_is_fed_even_when_the_program_never_reads_it():
    run = await run_python("while True:\n    pass", stdin="x" * 500_000, limits=SandboxLimits(timeout_s=0.3))
    assert run.timed_out is True  # the wall-clock limit still applies: feeding stdin cannot block the run
    echoed = await run_python("import sys\nprint(len(sys.stdin.read()))", stdin="y" * 500_000)
    assert echoed.stdout == "500000\n"


async def test_concurrent_runs_are_separate_from_each_other():
    import asyncio

    code = "import os\nopen('/tmp/mark', 'w').write(str(os.getpid()))\nprint(os.getuid(), os.getcwd(), sorted(os.listdir('/tmp')))"
    runs = await asyncio.gather(*(run_python(code) for _ in range(4)))
    assert all(r.exit_code == 0 for r in runs), [r.stderr for r in runs]
    lines = [r.stdout.split(" ", 1) for r in runs]
    assert len({cwd for _, cwd in lines}) == 4  # four fresh working folders
    if all(_run_uid(r.isolation) is not None for r in runs):
        assert len({uid for uid, _ in lines}) == 4  # four different uids
    if all(r.isolation["tmp"].startswith("private") for r in runs):
        # each run's /tmp holds only its own working folder and its own mark
        assert all(r.stdout.rstrip().endswith("'mark']") and r.stdout.count("echo_sbx_") == 2 for r in runs)


def test_the_tool_result_names_the_memory_limit_of_the_run_when_processes_together_exceed_it():
    code = (  # four children hold 100 MB each at the same time; each alone is well under memory_mb
        "import os\n"
        "ready_r, ready_w = os.pipe()\n"
        "hold_r, hold_w = os.pipe()\n"
        "for _ in range(4):\n"
        "    if os.fork() == 0:\n"
        "        block = b'x' * (100 << 20)\n"
        "        os.write(ready_w, b'.')\n"
        "        os.read(hold_r, 1)\n"  # never answered: hold the block until the run ends
        "held = 0\n"
        "while held < 4:\n"
        "    held += len(os.read(ready_r, 1))\n"
        "print('survived')\n"
    )
    result = invoke("tool_code_executor", {"code": code, "memory_mb": 256})
    assert result.success, result.error
    out = result.output
    assert "survived" not in out["stdout"]
    assert "memory limit of the run (256 MB, memory_mb)" in out["limit_hit"]
    assert out["isolation"]["memory"].startswith("run: 256 MB for all the run's processes together")


async def test_the_smallest_memory_limit_still_runs_a_small_program():
    run = await run_python("print(sum(range(10)))", limits=SandboxLimits(memory_mb=32))
    assert run.stdout == "45\n", run.stderr
    assert run.exit_code == 0 and run.limit_hit is None
