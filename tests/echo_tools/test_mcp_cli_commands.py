"""`echo-tools mcp add -- CMD ARGS`, relative commands stored absolute, `mcp load FILE`, and `mcp resources`
/ `mcp prompts`, in process against real MCP server processes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ._cli_support import InProcessCli, assert_one_line_error
from ._mcp_support import server_python

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
CALC = str(SERVERS / "calc_server.py")
CONTENT = str(SERVERS / "content_server.py")
SERVER_PY = server_python(1)  # the servers are written for the SDK 1.x: an interpreter that has it


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


def stored(home: Path) -> dict[str, dict[str, object]]:
    [config] = home.rglob("mcp_servers.json")
    servers: dict[str, dict[str, object]] = json.loads(config.read_text())["mcpServers"]
    return servers


def test_double_dash_passes_the_rest_as_the_command_even_options_and_options_before_it_apply(
    home: Path, run_cli: InProcessCli
) -> None:
    added = run_cli(home, "mcp", "add", "calc", "--env", "CALC_MODE=x", "--", SERVER_PY, "-u", CALC)
    assert added.returncode == 0, added.stderr
    assert "mcp_calc_add" in added.stdout
    listed = run_cli(home, "mcp", "list")
    assert f"calc  {SERVER_PY} -u {CALC}" in listed.stdout
    assert stored(home)["calc"]["env"] == {"CALC_MODE": "x"}
    assert run_cli(home, "invoke", "calc_add", "--input", '{"a": 2, "b": 3}').returncode == 0


def test_arg_option_still_works_with_equals_for_dash_values(home: Path, run_cli: InProcessCli) -> None:
    added = run_cli(home, "mcp", "add", "calc", "--command", SERVER_PY, "--arg=-u", "--arg", CALC)
    assert added.returncode == 0, added.stderr
    assert f"calc  {SERVER_PY} -u {CALC}" in run_cli(home, "mcp", "list").stdout


def test_relative_command_is_stored_absolute_bare_name_as_given(
    home: Path, tmp_path: Path, run_cli: InProcessCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "bin").mkdir(parents=True)
    script = project / "bin" / "py"
    script.write_text(f'#!/bin/sh\nexec {SERVER_PY} "$@"\n')
    script.chmod(0o755)
    monkeypatch.chdir(project)
    added = run_cli(home, "mcp", "add", "calc", "--", "bin/py", CALC)
    assert added.returncode == 0, added.stderr
    monkeypatch.chdir(tmp_path)  # from another folder the stored server still starts
    refreshed = run_cli(home, "mcp", "refresh", "calc")
    assert refreshed.returncode == 0, refreshed.stderr
    assert f"calc  {project / 'bin' / 'py'} {CALC}" in run_cli(home, "mcp", "list").stdout
    bare = run_cli(home, "mcp", "add", "nothere", "--", "no-such-mcp-server-binary", "x")
    assert "'no-such-mcp-server-binary'" in assert_one_line_error(bare)


def test_command_given_twice_or_not_at_all_is_a_usage_error(home: Path, run_cli: InProcessCli) -> None:
    both = run_cli(home, "mcp", "add", "calc", "--command", SERVER_PY, "--", SERVER_PY, CALC)
    line = assert_one_line_error(both, code=2)
    assert "--command" in line and "--" in line and CALC in line
    neither = run_cli(home, "mcp", "add", "calc")
    assert "--url URL" in assert_one_line_error(neither, code=2)


def test_load_adds_every_server_of_a_vscode_config(home: Path, tmp_path: Path, run_cli: InProcessCli) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "servers": {
                    "calc": {"command": SERVER_PY, "args": [CALC]},
                    "content": {"type": "stdio", "command": SERVER_PY, "args": [CONTENT]},
                }
            }
        )
    )
    loaded = run_cli(home, "mcp", "load", str(config))
    assert loaded.returncode == 0, loaded.stderr
    assert loaded.stdout.startswith(f"2 MCP servers added from {config}")
    assert "mcp_calc_add" in loaded.stdout and "mcp_content_read_resource" in loaded.stdout
    assert set(stored(home)) == {"calc", "content"}


def test_load_of_a_file_without_servers_names_the_field(
    home: Path, tmp_path: Path, run_cli: InProcessCli
) -> None:
    config = tmp_path / "bad.json"
    config.write_text(json.dumps({"tools": {}}))
    line = assert_one_line_error(run_cli(home, "mcp", "load", str(config)))
    assert "mcpServers" in line and str(config) in line


def test_resources_and_prompts_are_listed(home: Path, run_cli: InProcessCli) -> None:
    assert run_cli(home, "mcp", "add", "content", "--", SERVER_PY, CONTENT).returncode == 0
    resources = run_cli(home, "mcp", "resources", "content")
    assert resources.returncode == 0, resources.stderr
    lines = resources.stdout.splitlines()
    assert lines[0] == "MCP server 'content': 3 resources"
    assert "  notes://readme  text/plain  What this server is." in lines
    assert any(line.startswith("  notes://by-name/{name}") for line in lines)
    assert lines[-1] == "(agents read them with the tool mcp_content_read_resource)"
    # every resource and resource template of the server, all pages (`list_catalogue`)
    uris = {line.split()[0] for line in lines[1:-1]}
    assert uris == {"notes://readme", "notes://logo", "notes://by-name/{name}"}
    prompts = run_cli(home, "mcp", "prompts", "content")
    assert prompts.returncode == 0, prompts.stderr
    assert "  summarise(topic)  Ask for a summary of a topic." in prompts.stdout.splitlines()


def test_resources_of_an_unknown_server_name_it(home: Path, run_cli: InProcessCli) -> None:
    line = assert_one_line_error(run_cli(home, "mcp", "resources", "ghost"))
    assert "'ghost'" in line
