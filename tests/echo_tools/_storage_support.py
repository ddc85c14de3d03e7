"""Helpers shared by the catalogue tests: corpus copies, tool definitions, child Python processes.

The child processes run real writers (concurrency, crash safety) and the read-only storage case, which
needs a process that the kernel really refuses writes to, even when the tests run as root.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.conftest import Corpus

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent

CHILD_ENV = {
    "CREWAI_DISABLE_TELEMETRY": "true",
    "OTEL_SDK_DISABLED": "true",
    "PYTHONDONTWRITEBYTECODE": "1",
}


def corpus_copy(corpus: Corpus, dest: Path, *, part: str = "tools") -> Path:
    """A writable copy of one corpus folder (the corpus itself may be read-only)."""
    shutil.copytree(corpus / part, dest)
    dest.chmod(0o755)
    for path in dest.iterdir():
        path.chmod(0o644)
    return dest


def tool_dict(name: str, **overrides: Any) -> dict[str, Any]:
    """A minimal valid `local` tool definition named `name` (module inside `AgentTools`)."""
    data: dict[str, Any] = {
        "name": name,
        "description": f"The {name} tool",
        "tool_type": "local",
        "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        "output_schema": {"type": "object"},
        "execution_config": {"module": "AgentTools.sample.service", "class": "Sample", "method": "run"},
    }
    data.update(overrides)
    return data


def write_manifest(base: Path, folder: str, data: Any, *, raw: str | None = None) -> Path:
    """Write `<base>/<folder>/tool_manifest.json` holding `data` (or the `raw` text as is)."""
    path = base / folder / "tool_manifest.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(raw if raw is not None else json.dumps(data, indent=2), encoding="utf-8")
    return path


def folder_state(folder: Path) -> dict[str, bytes]:
    """Every file's bytes by name, to prove that nothing stored changed."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def child_env() -> dict[str, str]:
    env = {**os.environ, **CHILD_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return env


def run_python(code: str, *, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter of this venv, from the repository root."""
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def spawn_script(script: str, *args: str) -> subprocess.Popen[str]:
    """Start one of the helper scripts beside this module; stdout is a pipe of text lines."""
    return subprocess.Popen(
        [sys.executable, str(HERE / script), *args],
        cwd=REPO_ROOT,
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def make_read_only(folder: Path) -> None:
    """chmod the folder 0o555 and its files 0o444."""
    for path in folder.iterdir():
        path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    folder.chmod(0o555)


def run_without_write_override(
    script: str, *args: str, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """Run a helper script in a process the kernel holds to file permissions, even when we are root.

    Root ignores mode bits through CAP_DAC_OVERRIDE, so chmod 0o555 alone proves nothing in CI. The
    child (`_no_override.py`) drops that capability (and DAC_READ_SEARCH, FOWNER) from its bounding set
    and re-executes itself: the new image keeps uid 0, but writes into a 0o555 folder fail with EACCES.
    """
    return subprocess.run(
        [sys.executable, str(HERE / "_no_override.py"), script, *args],
        cwd=REPO_ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
