"""`echo-tools runs show RUN_ID` (one run: status, timings, owner, failed calls, the call tree, the final
state) and `echo-tools events` newest first (`--oldest-first` to reverse), on a history made here."""

from __future__ import annotations

import json
from pathlib import Path

from echo_tools.events import ToolEvent
from echo_tools.history import RunHistory

from ._cli_support import InProcessCli


def _history(home: Path) -> None:
    history = RunHistory(home)
    history.start_run("run_v", {"source": {}, "owner": "alice"}, workflow_id="wf_v")
    calls = [
        ToolEvent(type="tool.invoked", run_id="run_v", tool_id="tool_skill", call_id="c1", agent_name="Planner"),
        ToolEvent(type="tool.invoked", run_id="run_v", tool_id="tool_inner", call_id="c2", parent_call_id="c1"),
        ToolEvent(type="tool.failed", run_id="run_v", tool_id="tool_inner", call_id="c2", parent_call_id="c1",
                  error="<script>boom</script>", duration_ms=4.0),
        # a call of a sub-run (a workflow tool's run, `run_v/...`) made inside the skill's call
        ToolEvent(type="tool.invoked", run_id="run_v/sub/1", tool_id="tool_deep", call_id="c3", parent_call_id="c1"),
        ToolEvent(type="tool.completed", run_id="run_v/sub/1", tool_id="tool_deep", call_id="c3", parent_call_id="c1"),
        ToolEvent(type="tool.completed", run_id="run_v", tool_id="tool_skill", call_id="c1", duration_ms=9.5),
    ]  # fmt: skip
    for event in calls:
        history(event)
    failed = {"tool_id": "tool_inner", "agent_name": "Planner", "error": "<script>boom</script>"}
    history.set_status(
        "run_v", "completed_with_errors", "1 tool call(s) failed", details={"failed_calls": [failed]}
    )
    history.close()


def test_runs_show_gives_status_timings_failed_calls_and_the_call_tree(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    _history(home)
    shown = run_cli(home, "runs", "show", "run_v")
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "run run_v  completed_with_errors"
    assert "workflow wf_v" in shown.stdout and "owner alice" in shown.stdout and "took " in shown.stdout
    assert "error: 1 tool call(s) failed" in shown.stdout
    assert (
        "failed calls (1):" in shown.stdout and "tool_inner by Planner: <script>boom</script>" in shown.stdout
    )
    skill = next(i for i, line in enumerate(lines) if "tool_skill" in line and "9.5 ms" in line)
    inner = lines[skill + 1]
    assert "tool_inner" in inner and "failed" in inner  # nested one level under the skill's call
    assert len(inner) - len(inner.lstrip()) > len(lines[skill]) - len(lines[skill].lstrip())
    assert "tool_deep" in lines[skill + 2] and lines[skill + 2].startswith(
        inner[: len(inner) - len(inner.lstrip())]
    )
    as_json = json.loads(run_cli(home, "runs", "show", "run_v", "--json").stdout)
    assert [c["tool_id"] for c in as_json["calls"][0]["calls"]] == ["tool_inner", "tool_deep"]
    assert as_json["calls"][0]["calls"][0]["status"] == "failed"
    listed = json.loads(run_cli(home, "runs", "--json").stdout)["runs"]
    assert [r["run_id"] for r in listed] == ["run_v"]  # the sub-run is part of its run
    assert as_json["run"]["owner"] == "alice" and "source" not in as_json["run"]


def test_runs_show_of_an_unknown_run_names_it(run_cli: InProcessCli, tmp_path: Path) -> None:
    result = run_cli(tmp_path / "home", "runs", "show", "run_nope")
    assert result.returncode == 1 and "'run_nope'" in result.stderr
    result = run_cli(tmp_path / "home", "runs", "show")
    assert result.returncode == 2 and "RUN_ID" in result.stderr


def test_events_lists_newest_first_and_oldest_first_on_request(run_cli: InProcessCli, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _history(home)
    newest = run_cli(home, "events", "--run", "run_v", "--limit", "2", "--json")
    assert [e["tool_id"] for e in json.loads(newest.stdout)["events"]] == ["tool_skill", "tool_inner"]
    oldest = run_cli(home, "events", "--run", "run_v", "--limit", "2", "--oldest-first", "--json")
    assert [e["type"] for e in json.loads(oldest.stdout)["events"]] == ["tool.invoked", "tool.invoked"]
