"""The `echo-tools` command over a fresh storage folder: in-process through `echo_tools.cli.main(argv)`,
plus one subprocess smoke test per command group (list/show/invoke, discover, mcp, serve) through the real
entry point (`python -m echo_tools.cli`), which checks exit codes and the two output streams of a process.

The storage starts empty, so the first command discovers the real AgentTools (the calculator is used
for real calls). Errors must be one line on stderr with a non-zero exit code, never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from echo_tools.cli import CliError

from ._cli_support import InProcessCli, assert_one_line_error, cli

COMMANDS = (
    "list",
    "show",
    "invoke",
    "validate",
    "discover",
    "mcp",
    "events",
    "run",
    "compile",
    "demo",
    "serve",
)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


def test_help_lists_every_command(run_cli: InProcessCli, home: Path) -> None:
    result = run_cli(home, "--help")
    assert result.returncode == 0
    for command in COMMANDS:
        assert f"    {command} " in result.stdout
    assert "--storage" in result.stdout


def test_list_discovers_the_agent_tools_into_an_empty_storage(run_cli: InProcessCli, home: Path) -> None:
    result = run_cli(home, "list")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0].split() == ["TOOL_ID", "TYPE", "STATUS", "VERSION", "NAME"]
    assert any(
        line.split()[:3] == ["tool_calculator", "local", "active"] for line in result.stdout.splitlines()
    )
    assert (home / "tool_calculator.json").is_file()


def test_list_json_keeps_echoai_list_items(run_cli: InProcessCli, home: Path) -> None:
    result = run_cli(home, "list", "--json")
    items = json.loads(result.stdout)
    calculator = next(i for i in items if i["tool_id"] == "tool_calculator")
    assert set(calculator) == {"tool_id", "name", "description", "tool_type", "status", "version", "tags"}


def test_show_prints_the_definition_by_id_or_name(run_cli: InProcessCli, home: Path) -> None:
    by_name = json.loads(run_cli(home, "show", "Calculator").stdout)
    assert by_name["tool_id"] == "tool_calculator"
    assert by_name["execution_config"]["module"].startswith("AgentTools.calculator")
    line = assert_one_line_error(run_cli(home, "show", "no_such_tool"))
    assert "'no_such_tool'" in line


def test_invoke_prints_the_tool_result_and_exits_zero(run_cli: InProcessCli, home: Path) -> None:
    result = run_cli(home, "invoke", "calculator", "--input", '{"operation": "add", "values": [2, 3]}')
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["success"] is True
    assert payload["output"]["result"] == 5


def test_invoke_reads_the_input_from_a_file(run_cli: InProcessCli, home: Path, tmp_path: Path) -> None:
    data = tmp_path / "input.json"
    data.write_text(json.dumps({"operation": "multiply", "values": [6, 7]}))
    result = run_cli(home, "invoke", "tool_calculator", "--input", f"@{data}")
    assert json.loads(result.stdout)["output"]["result"] == 42


def test_a_failed_invoke_prints_the_result_and_exits_one(home: Path) -> None:
    # the list/show/invoke group's subprocess smoke test: exit code and both streams of the real process
    result = cli(home, "invoke", "calculator", "--input", '{"operation": "divide", "values": [1, 0]}')
    assert result.returncode == 1
    payload = json.loads(result.stdout)
    assert payload["success"] is False and payload["error_type"] == "execution"
    line = assert_one_line_error(result)
    assert "tool_calculator failed (execution)" in line


def test_invalid_input_names_the_field(run_cli: InProcessCli, home: Path) -> None:
    result = run_cli(home, "invoke", "calculator", "--input", '{"operation": "add", "values": ["x"]}')
    assert result.returncode == 1
    assert "input.values[0]" in json.loads(result.stdout)["error"]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("{bad", "--input is not valid JSON"),
        ("[1, 2]", "--input must be a JSON object, got list"),
        ("@/nonexistent/input.json", "--input file '/nonexistent/input.json' cannot be read"),
    ],
)
def test_bad_input_is_a_one_line_error(run_cli: InProcessCli, home: Path, given: str, expected: str) -> None:
    line = assert_one_line_error(run_cli(home, "invoke", "calculator", "--input", given))
    assert expected in line


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"{bad", "is not valid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        (b"[1, 2]", "must be a JSON object, got list"),
        (b"\xff\xfe{}", "is not UTF-8 text: invalid start byte at byte 0"),
    ],
)
def test_a_bad_input_or_workflow_file_is_a_one_line_error_naming_it(
    run_cli: InProcessCli, home: Path, tmp_path: Path, content: bytes, expected: str
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    line = assert_one_line_error(run_cli(home, "invoke", "calculator", "--input", f"@{bad}"))
    assert f"--input file {str(bad)!r} {expected}" in line
    line = assert_one_line_error(run_cli(home, "compile", str(bad)))
    assert f"workflow file {str(bad)!r} {expected}" in line


def test_debug_shows_the_traceback(run_cli: InProcessCli, home: Path) -> None:
    # `--debug` lets the exception out of `main`, so the interpreter prints its traceback and exits non-zero
    with pytest.raises(CliError, match="--input is not valid JSON") as caught:
        run_cli(home, "--debug", "invoke", "calculator", "--input", "{bad")
    assert caught.value.code != 0


def test_validate_exits_by_validity_and_names_the_field(run_cli: InProcessCli, home: Path) -> None:
    ok = run_cli(home, "validate", "calculator", "--input", '{"operation": "add", "values": [1]}')
    assert ok.returncode == 0 and json.loads(ok.stdout)["valid"] is True
    bad = run_cli(home, "validate", "calculator", "--input", '{"operation": "teleport"}')
    assert bad.returncode == 1
    errors = json.loads(bad.stdout)["errors"]
    assert any(e.startswith("input.operation") and "teleport" in e for e in errors)


def test_discover_reports_the_tools_and_bad_manifests(
    run_cli: InProcessCli, home: Path, tmp_path: Path
) -> None:
    # the discover group's subprocess smoke test
    folder = tmp_path / "more_tools"
    (folder / "broken").mkdir(parents=True)
    (folder / "broken" / "tool_manifest.json").write_text("{oops")
    result = cli(home, "discover", str(folder))
    assert result.returncode == 0
    assert result.stdout.startswith("Discovered 0 tools")
    assert "broken" in result.stderr and "not valid JSON" in result.stderr
    default = run_cli(home, "discover")
    assert "tool_calculator" in default.stdout


def test_events_pretty_prints_the_log_of_an_invoke(run_cli: InProcessCli, home: Path, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    run_cli(
        home,
        "invoke",
        "calculator",
        "--input",
        '{"operation": "add", "values": [1, 1]}',
        "--run-id",
        "r7",
        "--events",
        str(log),
    )
    with log.open("a") as fh:
        fh.write("not json\n")
    result = run_cli(home, "events", str(log))
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    assert "tool.invoked" in lines[0] and "tool_calculator" in lines[0] and "run=r7" in lines[0]
    assert "tool.completed" in lines[1] and " ms" in lines[1]
    assert lines[-1] == "2 events"
    assert "is not JSON, skipped" in result.stderr


def test_serve_refuses_a_public_host_without_an_api_key(home: Path) -> None:
    # the serve group's subprocess smoke test: exit code and both streams of the real process
    line = assert_one_line_error(cli(home, "serve", "--host", "0.0.0.0"), code=2)
    assert "API key is required" in line and "'0.0.0.0'" in line


def test_mcp_add_with_a_malformed_env_pair_is_a_usage_error(home: Path) -> None:
    # the mcp group's subprocess smoke test: exit code and both streams of the real process
    line = assert_one_line_error(
        cli(home, "mcp", "add", "files", "--command", "x", "--env", "NOEQUALS"), code=2
    )
    assert "--env expects KEY=VALUE, got 'NOEQUALS'" in line


def test_list_and_help_import_no_agent_framework_or_web_framework(home: Path) -> None:
    # a subprocess of its own: only a fresh interpreter shows which modules `list` imports
    code = (
        "import sys, io, contextlib\n"
        "from echo_tools import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['list']) == 0\n"
        "heavy = ('crewai', 'langgraph', 'langchain_core', 'fastapi', 'uvicorn', 'mcp', 'litellm')\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & set(heavy)))\n"
    )
    env = {**os.environ, "ECHO_TOOLS_HOME": str(home)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.slow  # four MCP server processes (add, two invokes, refresh)
def test_mcp_add_list_refresh_invoke_and_remove_a_real_stdio_server(
    run_cli: InProcessCli, home: Path
) -> None:
    server = Path(__file__).resolve().parent / "mcp_servers" / "calc_server.py"
    added = run_cli(
        home,
        "mcp",
        "add",
        "calc",
        "--command",
        sys.executable,
        "--arg",
        str(server),
        "--env",
        "CALC_MODE=test",
    )
    assert added.returncode == 0, added.stderr
    assert added.stdout.startswith("MCP server 'calc':") and "mcp_calc_add" in added.stdout
    listed = run_cli(home, "mcp", "list")
    assert listed.stdout.startswith("calc  ") and str(server) in listed.stdout
    assert "mcp_calc_add" in run_cli(home, "list", "--type", "mcp").stdout
    result = run_cli(home, "invoke", "calc_add", "--input", '{"a": 2, "b": 40}')
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["output"] == {"result": 42.0}
    failed = run_cli(home, "invoke", "calc_fail", "--input", '{"message": "nope"}')
    assert failed.returncode == 1 and "nope" in json.loads(failed.stdout)["error"]
    refreshed = run_cli(home, "mcp", "refresh", "calc")
    assert refreshed.returncode == 0 and "mcp_calc_add  active" in refreshed.stdout
    removed = run_cli(home, "mcp", "remove", "calc")
    assert removed.returncode == 0 and "mcp_calc_add" in removed.stdout
    assert run_cli(home, "mcp", "list").stdout.startswith("No MCP servers configured")
    gone = run_cli(home, "invoke", "calc_add", "--input", '{"a": 1, "b": 1}')
    assert gone.returncode == 1  # its tools stay in the catalogue, disabled
