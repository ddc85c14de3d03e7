"""`echo-tools run` that pauses at a HITL node and `echo-tools resume`: the embedded path (runs.sqlite in the
storage folder), pause in one process and resume from another; bad decisions and unknown or finished runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from echo_tools.history import RunHistory
from tests.workflow_bridge._compiler_support import agent, chain

from ._cli_support import InProcessCli, assert_one_line_error, cli

REPO = Path(__file__).resolve().parents[2]
MARKET_SCAN = REPO / "tests" / "fixtures" / "echoai" / "canvases" / "marketScan.json"


def gated_workflow(folder: Path) -> Path:
    """A workflow file: an agent with the shipped calculator, a HITL gate, the end."""
    wf, agents = chain(
        agent("adder", tools=["tool_calculator"], prompt='Add: {"operation": "add", "values": [2, 3]}'),
        agent("gate", "HITL", metadata={"hitl_config": {"title": "Ship the sum?"}}),
        agent("end", "End", output_schema=["result"]),
        workflow_id="wf_gated",
    )
    path = folder / "gated.json"
    path.write_text(json.dumps({"workflow": wf, "agents": agents}), encoding="utf-8")
    return path


@pytest.mark.slow  # a fresh interpreter importing CrewAI and LangGraph
def test_a_run_paused_in_one_process_resumes_from_another(run_cli: InProcessCli, tmp_path: Path) -> None:
    home = tmp_path / "home"
    # paused in this process, resumed by `echo-tools resume` in its own (test_resume_api.py pauses a run in
    # an `echo-tools run` process and resumes it here)
    paused = run_cli(home, "run", str(gated_workflow(tmp_path)), "--run-id", "run_gated")
    assert paused.returncode == 0, paused.stderr[-2000:]
    assert "run run_gated interrupted" in paused.stdout
    assert RunHistory(home).run("run_gated")["status"] == "interrupted"  # type: ignore[index]

    resumed = cli(home, "resume", "run_gated", "--edit", '{"crew_result": "five"}', timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "run.resumed" in resumed.stdout
    assert "== crew_result (run run_gated) ==\nfive" in resumed.stdout
    history = RunHistory(home)
    assert history.run("run_gated")["status"] == "completed"  # type: ignore[index]
    assert "tool.completed" in [e.type for e in history.events(run_id="run_gated")]


def test_an_echoai_canvas_paused_at_its_gate_is_rejected_from_the_cli(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    run_cli(home, "run", str(MARKET_SCAN), "--run-id", "run_scan")
    assert RunHistory(home).run("run_scan")["status"] == "interrupted"  # type: ignore[index]
    result = run_cli(home, "resume", "run_scan", "--reject", "--comment", "not yet")
    assert "run.resumed" in result.stdout and "crew_result (run run_scan)" in result.stdout
    state = RunHistory(home).run("run_scan")
    assert state is not None and state["status"] in ("completed", "failed")
    again = run_cli(home, "resume", "run_scan", "--approve")
    line = assert_one_line_error(again)
    assert "'run_scan'" in line and f"{state['status']!r}" in line and "not 'interrupted'" in line


def test_resuming_an_unknown_run_names_it(run_cli: InProcessCli, tmp_path: Path) -> None:
    line = assert_one_line_error(run_cli(tmp_path / "home", "resume", "run_nope", "--approve"))
    assert "run_id 'run_nope'" in line


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        ((), "one of the arguments --approve --reject --edit --answer is required"),
        (("--approve", "--reject"), "not allowed with argument"),
        (("--edit", "{nope"), "--edit must be a JSON object, got '{nope'"),
        (("--edit", "[1]"), "--edit must be a JSON object, got '[1]'"),
        (("--answer", "{nope"), "--answer must be a JSON object, decline or cancel, got '{nope'"),
        (("--answer", "[1]"), "--answer must be a JSON object, decline or cancel, got '[1]'"),
        (("--answer", "{}", "--approve"), "not allowed with argument"),
    ],
)
def test_a_resume_without_one_good_decision_is_a_usage_error(
    run_cli: InProcessCli, tmp_path: Path, args: tuple[str, ...], shown: str
) -> None:
    result = run_cli(tmp_path / "home", "resume", "run_x", *args)
    assert result.returncode == 2
    assert shown in result.stderr
