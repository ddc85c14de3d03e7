"""Where things are kept, found from any folder of a project: `--storage`, else `ECHO_TOOLS_HOME`, else the
nearest `.echo_tools` from the current folder upward (as git finds `.git`), else one per-user default;
commands name the folder they looked in and how it was chosen."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from echo_tools.settings import find_storage
from tests.echo_tools._storage_support import REPO_ROOT


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ECHO_TOOLS_HOME", "XDG_DATA_HOME")}
    env["HOME"] = str(tmp_path / "user")  # the per-user default lives here, not in the real home
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    env["NO_COLOR"] = "1"
    return env


def _cli(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "echo_tools.cli", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_the_nearest_store_above_the_current_folder_is_found(tmp_path: Path) -> None:
    (tmp_path / "project" / ".echo_tools").mkdir(parents=True)
    deep = tmp_path / "project" / "src" / "pkg"
    deep.mkdir(parents=True)
    chosen = find_storage(environ={}, cwd=deep)
    assert chosen.path == tmp_path / "project" / ".echo_tools"
    assert "nearest .echo_tools above" in chosen.how and str(deep) in chosen.how


def test_an_explicit_setting_wins_over_a_found_store(tmp_path: Path) -> None:
    (tmp_path / ".echo_tools").mkdir()
    chosen = find_storage(environ={"ECHO_TOOLS_HOME": str(tmp_path / "elsewhere")}, cwd=tmp_path)
    assert (chosen.path, chosen.how) == (tmp_path / "elsewhere", "ECHO_TOOLS_HOME")
    assert find_storage(tmp_path / "given", environ={}, cwd=tmp_path).how == "--storage"


def test_without_any_store_the_per_user_default_is_used_and_named(tmp_path: Path) -> None:
    chosen = find_storage(environ={"XDG_DATA_HOME": str(tmp_path / "data")}, cwd=tmp_path)
    assert chosen.path == tmp_path / "data" / "echo-tools"
    assert chosen.describe().startswith(str(tmp_path / "data" / "echo-tools")) and "per-user" in chosen.how


@pytest.mark.slow  # several `echo-tools` processes
def test_every_folder_of_a_project_sees_one_catalogue_one_history_and_one_set_of_approvals(
    tmp_path: Path,
) -> None:
    env = _env(tmp_path)
    project = tmp_path / "project"
    (project / "app" / "jobs").mkdir(parents=True)
    (project / "docs").mkdir()
    made = _cli(project, env, "init")
    assert made.returncode == 0 and made.stdout.strip() == f"made {project / '.echo_tools'}", made.stderr
    # the README's first example, run from the project's root: its stored tools go into the project's store
    readme = textwrap.dedent(
        """
        from echo_tools import ToolExecutor, ToolRegistry, builtin_tools_dir
        from echo_tools.governance import SqliteApprovalStore

        def post(text: str) -> str:
            \"\"\"Post a text (a person approves it first).\"\"\"
            return text

        registry = ToolRegistry(storage_dir=".echo_tools")
        registry.discover_local_tools([builtin_tools_dir()])
        registry.add(post, approval="always")
        executor = ToolExecutor(registry, approvals=SqliteApprovalStore(".echo_tools"))
        print(executor.invoke_sync("post", {"text": "hi"}).metadata["approval_id"])
        """
    )
    asked = subprocess.run(
        [sys.executable, "-c", readme], cwd=project, env=env, capture_output=True, text=True, timeout=300
    )
    assert asked.returncode == 0, asked.stderr
    approval_id = asked.stdout.strip().splitlines()[-1]
    canvas = project / "app" / "calc.canvas.json"
    canvas.write_text(json.dumps(_canvas()), encoding="utf-8")
    ran = _cli(project / "app" / "jobs", env, "run", str(canvas), "--run-id", "run_from_jobs")
    assert ran.returncode == 0, ran.stderr
    assert f"storage {project / '.echo_tools'} (the nearest .echo_tools above" in " ".join(ran.stdout.split())

    for folder in (project / "app" / "jobs", project / "docs", project):
        listed = _cli(folder, env, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert "tool_calculator" in {t["tool_id"] for t in json.loads(listed.stdout)}
        runs = _cli(folder, env, "runs")
        assert runs.returncode == 0 and "run_from_jobs" in runs.stdout, runs.stdout + runs.stderr
        approvals = _cli(folder, env, "approvals", "list")
        assert approval_id in approvals.stdout, approvals.stdout + approvals.stderr
    assert not (tmp_path / "user" / ".local" / "share" / "echo-tools").exists()  # nothing went elsewhere

    lost = _cli(tmp_path, env, "show", "calc")  # outside the project: the per-user default, and it says so
    assert lost.returncode == 1
    assert "Did you mean 'Calculator'?" in lost.stderr
    assert str(tmp_path / "user" / ".local" / "share" / "echo-tools") in lost.stderr
    assert "per-user default" in lost.stderr


def _canvas() -> dict[str, object]:
    return {
        "workflow_name": "One sum",
        "canvas_nodes": [
            {"id": 1, "type": "Start", "name": "Start"},
            {
                "id": 2,
                "type": "Agent",
                "name": "Adder",
                "config": {
                    "prompt": 'Add: {"operation": "add", "values": [2, 3]}',
                    "tools": [{"tool_id": "tool_calculator"}],
                },
            },
            {"id": 3, "type": "End", "name": "End"},
        ],
        "connections": [{"from": 1, "to": 2}, {"from": 2, "to": 3}],
    }
