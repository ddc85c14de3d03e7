"""The code_executor tool: run a Python program in the sandbox and return its output.

See `echo_tools/sandbox/__init__.py` for exactly what is and is not isolated; every result carries an
`isolation` report of what this run really got.
"""

from __future__ import annotations

from typing import Any

from echo_tools.sandbox import SandboxLimits, check_env, run_python

MAX_CODE_CHARS = 200_000
MAX_STDIN_CHARS = 1_000_000
MAX_TIMEOUT_S = 60.0


def limits_for(timeout_seconds: float, memory_mb: int) -> SandboxLimits:
    """Checked `SandboxLimits` from the tool's inputs."""
    if not 0 < timeout_seconds <= MAX_TIMEOUT_S:
        raise ValueError(f"timeout_seconds must be in (0, {MAX_TIMEOUT_S:g}], got {timeout_seconds!r}")
    if not 32 <= memory_mb <= 2048:
        raise ValueError(f"memory_mb must be between 32 and 2048, got {memory_mb!r}")
    return SandboxLimits(timeout_s=float(timeout_seconds), memory_mb=int(memory_mb))


class CodeExecutorService:
    """Runs Python code in a confined subprocess."""

    async def execute(
        self,
        code: str,
        language: str = "python",
        stdin: str | None = None,
        timeout_seconds: float = 10.0,
        memory_mb: int = 256,
        argv: list[str] | None = None,
        env: dict[str, str] | None = None,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Run `code` and return stdout, stderr, exit_code, duration_ms, timed_out and the isolation report.

        A program that fails (exception, non-zero exit, killed by a limit) is a normal result; only
        input that cannot be run raises `ValueError`.
        """
        if language.lower() != "python":
            raise ValueError(f"language {language!r} is not supported; only 'python' is")
        if not code.strip():
            raise ValueError("code is empty; give the Python program to run")
        if len(code) > MAX_CODE_CHARS:
            raise ValueError(f"code is {len(code)} characters long; at most {MAX_CODE_CHARS} are allowed")
        if stdin is not None and len(stdin) > MAX_STDIN_CHARS:
            raise ValueError(f"stdin is {len(stdin)} characters long; at most {MAX_STDIN_CHARS} are allowed")
        if argv is not None and (len(argv) > 64 or not all(isinstance(a, str) for a in argv)):
            raise ValueError(f"argv must be at most 64 strings, got {argv!r:.80}")
        run = await run_python(
            code,
            stdin=stdin,
            limits=limits_for(timeout_seconds, memory_mb),
            env=check_env(env),
            argv=argv,
        )
        return run.to_dict()
