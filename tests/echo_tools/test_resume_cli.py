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
    assert state is not None and state["status"] in ("completed", "completed_with_errors")
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


@pytest.mark.slow  # a fresh interpreter importing CrewAI and LangGraph
def test_a_canvas_without_workflow_id_resumed_by_another_process_runs_its_remaining_agent(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    from tests.workflow_bridge._canvas_runs import gated_canvas, hit_counter

    home = tmp_path / "home"
    with hit_counter() as (url, hits):
        canvas = tmp_path / "canvas.json"
        canvas.write_text(
            json.dumps(gated_canvas({"url": url, "method": "POST"}, second_tool="tool_http_request")),
            encoding="utf-8",
        )
        paused = run_cli(home, "run", str(canvas), "--run-id", "run_canvas")
        assert paused.returncode == 0, paused.stderr[-2000:]
        assert "run run_canvas interrupted" in paused.stdout and not hits

        loopback = {"ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK": "1"}
        resumed = cli(home, "resume", "run_canvas", "--approve", timeout=300, env=loopback)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        assert len(hits) == 1  # the second agent's tool really ran, in the resuming process
        assert "[rehearsal] Actor:" in resumed.stdout and '"shipped": true' in resumed.stdout
        history = RunHistory(home)
        assert history.run("run_canvas")["status"] == "completed"  # type: ignore[index]
        tools = [e.tool_id for e in history.events(run_id="run_canvas") if e.type == "tool.completed"]
        assert tools == ["tool_calculator", "tool_http_request"]
        crew_result = resumed.stdout.split("== crew_result (run run_canvas) ==\n", 1)[1]

        replayed = run_cli(home, "replay", "run_canvas", "--run-id", "run_canvas_again")
        assert replayed.returncode == 0, replayed.stderr[-2000:]
        assert replayed.stdout.split("== crew_result (run run_canvas_again) ==\n", 1)[1] == crew_result
        assert len(hits) == 1  # the replay answered the call from the recording


def test_resuming_a_run_paused_at_a_node_its_workflow_no_longer_has_names_the_node(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    paused = run_cli(home, "run", str(gated_workflow(tmp_path)), "--run-id", "run_moved")
    assert paused.returncode == 0, paused.stderr[-2000:]
    history = RunHistory(home)
    history.set_status("run_moved", "interrupted", details={"paused_at": ["gate_v1"]})
    history.close()
    line = assert_one_line_error(run_cli(home, "resume", "run_moved", "--approve"))
    assert "'run_moved'" in line and "gate_v1" in line and "no node" in line
    assert RunHistory(home).run("run_moved")["status"] == "interrupted"  # type: ignore[index]
