"""First contact (issue 26): `--version`, typed packages, `mcp add` with a script of the current folder,
a program that is not an MCP server refused at once, and `--allow-module` finding the current folder."""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from echo_tools import MCPConnectionError, ToolRegistry
from echo_tools.cli import main

ROOT = Path(__file__).resolve().parents[2]
SERVERS = Path(__file__).resolve().parent / "mcp_servers"


def test_version_prints_the_package_version(capsys):
    from echo_tools import __version__

    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith(f"echo-tools {__version__} (Python ")


def test_both_packages_ship_py_typed():
    assert (ROOT / "echo_tools" / "py.typed").is_file() and (ROOT / "workflow_bridge" / "py.typed").is_file()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["*"]
    assert any(d.startswith("langchain>") for d in pyproject["project"]["optional-dependencies"]["langgraph"])


def test_mcp_add_stores_a_script_of_the_current_folder_by_its_absolute_path(tmp_path, monkeypatch, capsys):
    here = tmp_path / "here"
    here.mkdir()
    for name in ("calc_server.py", "_serving.py"):
        shutil.copy(SERVERS / name, here / name)
    monkeypatch.chdir(here)
    store = str(tmp_path / "store")
    assert main(["--storage", store, "mcp", "add", "calc", "--", sys.executable, "calc_server.py"]) == 0
    capsys.readouterr()

    config = json.loads((tmp_path / "store" / "mcp_servers.json").read_text())["mcpServers"]["calc"]
    assert config["args"] == [str(here / "calc_server.py")]
    monkeypatch.chdir(tmp_path)  # another folder: the stored server still starts
    assert main(["--storage", store, "invoke", "mcp_calc_add", "--input", '{"a": 1, "b": 2}']) == 0
    assert "3" in capsys.readouterr().out


def test_a_program_that_is_not_an_mcp_server_is_refused_at_its_first_line():
    registry = ToolRegistry()
    chatty = "import time; print('hello from a script', flush=True); time.sleep(120)"
    with pytest.raises(MCPConnectionError) as caught:
        registry.add_mcp_server("notes", {"command": sys.executable, "args": ["-c", chatty], "timeout": 120})
    message = str(caught.value)
    assert "is not an MCP server: it wrote 'hello from a script' on stdout" in message
    assert "within" not in message  # not the initialize timeout


def test_allow_module_finds_a_module_of_the_current_folder(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_first_tools.py").write_text(
        "from echo_tools import tool\n\n@tool\ndef twice(x: int) -> int:\n    return 2 * x\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_first_tools

    store = tmp_path / "catalogue"
    ToolRegistry(storage_dir=store, allowed_modules=["my_first_tools"]).register(
        my_first_tools.twice.tool_def
    )
    sys.modules.pop("my_first_tools")
    sys.path.remove(str(tmp_path))
    code = main(
        [
            "--storage",
            str(store),
            "--allow-module",
            "my_first_tools",
            "invoke",
            "twice",
            "--input",
            '{"x": 4}',
        ]
    )
    assert code == 0 and "8" in capsys.readouterr().out
