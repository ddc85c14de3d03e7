"""`echo-tools run`, `compile` and `demo`: the sample workflow offline, with the rehearsal announcement, node
and tool lines as they happen, the final crew_result, and the JSONL event log.

The commands run in-process through `echo_tools.cli.main(argv)` (CrewAI and LangGraph are imported once per
test session, not once per command); a missing workflow file is this group's subprocess smoke test through
the real entry point.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from ._cli_support import InProcessCli, assert_one_line_error, cli

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_workflows" / "code_pipeline.canvas.json"


@pytest.mark.slow  # the whole sample workflow (and CrewAI's import, if no test before paid it)
def test_run_shows_nodes_and_tool_calls_then_the_crew_result(
    run_cli: InProcessCli, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log = tmp_path / "events.jsonl"
    with caplog.at_level(logging.WARNING):
        result = run_cli(tmp_path / "home", "run", str(SAMPLE), "--events", str(log), "--run-id", "run-cli-1")
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "REHEARSAL model" in out
    assert out.count("REHEARSAL model") == 1 and "REHEARSAL" not in result.stderr
    # a process of its own would print such a warning to stderr (logging's last resort); here the log
    # capture would take it, so it is checked there
    assert "REHEARSAL" not in caplog.text
    lines = out.splitlines()
    started = next(i for i, line in enumerate(lines) if "node.started Code Executor" in line)
    completed = next(i for i, line in enumerate(lines) if "completed Code Executor" in line)
    assert started < completed
    assert any("completed Code Tester" in line for line in lines)
    assert "== crew_result (run run-cli-1) ==" in out
    assert '"passed": 5' in out
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert {e["tool_id"] for e in events} == {"tool_code_executor", "tool_code_reviewer", "tool_code_tester"}
    assert {e["run_id"] for e in events} == {"run-cli-1"}


def test_compile_prints_the_graph_as_json(run_cli: InProcessCli, tmp_path: Path) -> None:
    result = run_cli(tmp_path / "home", "compile", str(SAMPLE), "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert len(summary["nodes"]) >= 5 and summary["edges"]
    assert not [d for d in summary["diagnostics"] if d["level"] == "error"]


def test_run_of_a_missing_file_is_a_one_line_error(tmp_path: Path) -> None:
    # the run/compile group's subprocess smoke test: exit code and both streams of the real process
    line = assert_one_line_error(cli(tmp_path / "home", "run", str(tmp_path / "nope.json")))
    assert "nope.json" in line and "cannot be read" in line


@pytest.mark.slow  # discovers every AgentTool and runs the whole sample workflow
def test_demo_records_its_run_where_runs_looks_and_runs_show_shows_it(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = run_cli(home, "demo")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Discovered" in result.stdout and "tool_calculator" in result.stdout
    assert "run.finished" in result.stdout
    assert "crew_result" in result.stdout
    listed = run_cli(home, "runs", "--json")  # the default storage, the demo's too: not a temporary folder
    runs = json.loads(listed.stdout)["runs"]
    assert len(runs) == 1 and runs[0]["status"] == "completed" and runs[0]["calls"] >= 3
    run_id = runs[0]["run_id"]
    assert f"echo-tools runs show {run_id}" in result.stdout

    shown = run_cli(home, "runs", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.startswith(f"run {run_id}  completed\n")
    assert "owner operator" in text and "took " in text
    assert "calls (" in text and "Code Executor" in text and "by " in text
    assert "crew_result:" in text
    as_json = json.loads(run_cli(home, "runs", "show", run_id, "--json").stdout)
    assert as_json["run"]["status"] == "completed" and as_json["failed_calls"] == []
    assert as_json["calls"][0]["tool_id"] == "tool_code_executor" and "crew_result" in as_json["state"]
