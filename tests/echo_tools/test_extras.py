"""The core installs and runs without any agent framework; a framework feature used without its extra says
which extra to install."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from echo_tools.errors import ToolConfigError
from echo_tools.extras import MissingExtraError, missing_extra, require

REPO_ROOT = Path(__file__).resolve().parents[2]
CALC_SERVER = REPO_ROOT / "tests" / "echo_tools" / "mcp_servers" / "calc_server.py"


def test_a_missing_framework_module_becomes_an_error_naming_its_extra() -> None:
    error = missing_extra(
        ModuleNotFoundError("No module named 'crewai'", name="crewai.tools"), "a crewai tool"
    )
    assert isinstance(error, MissingExtraError) and error.extra == "crewai"
    assert "a crewai tool needs 'crewai'" in str(error) and "pip install 'echo-tools[crewai]'" in str(error)


def test_an_import_error_of_a_module_no_extra_brings_is_passed_on_unchanged() -> None:
    original = ModuleNotFoundError("No module named 'nowhere'", name="nowhere")
    assert missing_extra(original, "anything") is original
    with pytest.raises(ModuleNotFoundError) as raised:
        require("nowhere_at_all_module", "a feature")
    assert not isinstance(raised.value, MissingExtraError)


def test_a_framework_class_that_cannot_be_imported_is_a_config_error_naming_the_extra() -> None:
    from echo_tools.backends._framework import framework_class

    with pytest.raises(ToolConfigError) as raised:
        framework_class("langgraph.not_a_module_of_it", "BaseTool", "a langchain tool")
    assert raised.value.field == "tool_type" and "echo-tools[langgraph]" in raised.value.message


def _run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    return subprocess.run(
        [str(venv / "bin" / args[0]), *args[1:]],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow  # builds a virtual environment and installs the core's dependencies (pip's cache helps)
def test_the_core_installed_without_extras_lists_invokes_and_calls_an_mcp_tool(tmp_path: Path) -> None:
    # an empty venv (no pip of its own: this interpreter's pip installs into it with --python, 5 s of CPU
    # less), without compiling every dependency's bytecode (a module compiles when first imported)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q"]
    install = subprocess.run(
        [*pip, "--no-compile", "--disable-pip-version-check", str(REPO_ROOT)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    frameworks = _run(venv, "python", "-c", "import crewai", cwd=tmp_path)
    assert "No module named 'crewai'" in frameworks.stderr  # really without the frameworks
    assert (
        "No module named 'langgraph'" in _run(venv, "python", "-c", "import langgraph", cwd=tmp_path).stderr
    )
    store = str(tmp_path / "store")

    listed = _run(venv, "echo-tools", "--storage", store, "list", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "tool_calculator" in {tool["tool_id"] for tool in json.loads(listed.stdout)}

    args = json.dumps({"operation": "add", "values": [2, 3]})
    invoked = _run(
        venv, "echo-tools", "--storage", store, "invoke", "calculator", "--input", args, cwd=tmp_path
    )
    assert invoked.returncode == 0, invoked.stderr
    assert json.loads(invoked.stdout)["success"] is True

    # the core takes the newest MCP SDK in range (2.x today): a server written for the venv's generation
    found = _run(
        venv, "python", "-c", "import importlib.metadata as m; print(m.version('mcp'))", cwd=tmp_path
    )
    script = CALC_SERVER if found.stdout.startswith("1.") else CALC_SERVER.with_name("calc_v2.py")
    server = [str(venv / "bin" / "python"), str(script)]
    added = _run(venv, "echo-tools", "--storage", store, "mcp", "add", "calc", "--", *server, cwd=tmp_path)
    assert added.returncode == 0, added.stderr
    called = _run(
        venv,
        "echo-tools",
        "--storage",
        store,
        "invoke",
        "mcp_calc_add",
        "--input",
        '{"a": 2, "b": 3}',
        cwd=tmp_path,
    )
    assert called.returncode == 0, called.stderr
    result = json.loads(called.stdout)
    assert result["success"] is True and "5" in json.dumps(result["output"])

    workflow = str(REPO_ROOT / "sample_workflows" / "code_pipeline.workflow.json")
    run = _run(venv, "echo-tools", "--storage", store, "run", workflow, cwd=tmp_path)
    assert run.returncode != 0 and "pip install 'echo-tools[" in run.stderr
