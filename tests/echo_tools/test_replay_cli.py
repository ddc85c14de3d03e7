"""`echo-tools replay RUN_ID`: a recorded run (paused, then resumed with an edit) runs again from its
recording under a new run id and prints the same crew_result; an unknown run is a one-line error."""

from __future__ import annotations

from pathlib import Path

from echo_tools.history import RunHistory

from ._cli_support import InProcessCli, assert_one_line_error
from .test_resume_cli import gated_workflow


def test_replay_answers_the_calls_from_the_recording_and_prints_the_crew_result(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    run_cli(home, "run", str(gated_workflow(tmp_path)), "--run-id", "run_first")
    resumed = run_cli(home, "resume", "run_first", "--edit", '{"crew_result": "five"}')
    assert resumed.returncode == 0, resumed.stderr
    replayed = run_cli(home, "replay", "run_first", "--run-id", "run_second")
    assert replayed.returncode == 0, replayed.stderr
    assert "== crew_result (run run_second) ==\nfive" in replayed.stdout
    assert "completed Calculator" in replayed.stdout
    # the replay ran no tool: the history holds the first run's calls only
    calls = [e for e in RunHistory(home).events(limit=1000) if e.type == "tool.invoked"]
    assert [e.run_id for e in calls] == ["run_first"]


def test_replay_of_an_unknown_run_names_it(run_cli: InProcessCli, tmp_path: Path) -> None:
    line = assert_one_line_error(run_cli(tmp_path / "home", "replay", "run_nope"))
    assert "run_id 'run_nope'" in line
