"""`echo-tools show ID --steps` draws a skill's steps; `echo-tools plan` draws (or prints) the planner's."""

from __future__ import annotations

import json
from pathlib import Path

from echo_tools import ToolRegistry, builtin_tools_dir
from echo_tools.cli.steps import render_steps, stages
from tests.echo_tools._cli_support import InProcessCli, assert_one_line_error

STEPS = [
    {"id": "total", "tool": "tool_calculator", "input": {"operation": "sum", "values": "$.input.values"}},
    {"id": "mean", "tool": "Calculator", "input": {"operation": "mean", "values": "$.input.values"}},
    {
        "id": "report",
        "tool": "tool_json_tools",
        "input": {"operation": "format", "data": {"sum": "$.steps.total.output.result"}},
        "depends_on": ["total", "mean"],
        "fallback": ["tool_text_tools", "tool_calculator"],
        "when": "$.steps.total.output.result",
    },
]


def _storage(tmp_path: Path) -> Path:
    storage = tmp_path / "tools"
    registry = ToolRegistry(storage_dir=storage, discovery_dirs=[builtin_tools_dir()])
    registry.discover_local_tools()
    registry.register({
        "tool_id": "stats", "name": "Stats", "tool_type": "skill",
        "input_schema": {"type": "object", "properties": {"values": {"type": "array"}}},
        "execution_config": {"steps": STEPS, "output": {"sum": "$.steps.total.output.result"}},
    })  # fmt: skip
    return storage


def test_stages_put_independent_steps_together() -> None:
    assert stages(STEPS) == {"total": 1, "mean": 1, "report": 2}
    chain = [{"id": "a"}, {"id": "b", "depends_on": ["a"]}, {"id": "c", "depends_on": ["b", "a"]}]
    assert stages(chain) == {"a": 1, "b": 2, "c": 3}


def test_show_steps_draws_ids_tools_dependencies_fallbacks_and_when(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    result = run_cli(tmp_path / "home", "--storage", str(_storage(tmp_path)), "show", "stats", "--steps")

    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "stats  Stats  (skill): 3 steps in 2 stages"
    assert lines[1].split() == ["├─", "[1]", "total", "tool_calculator"]
    assert lines[2] == '│     input {"operation": "sum", "values": "$.input.values"}'
    assert lines[3].split() == ["├─", "[1]", "mean", "Calculator", "(tool_calculator)"]
    assert lines[5].split() == ["└─", "[2]", "report", "tool_json_tools", "after", "total,", "mean"]
    assert lines[6] == "      fallback → tool_text_tools → tool_calculator"
    assert lines[7] == "      when $.steps.total.output.result"
    assert lines[-1] == 'output {"sum": "$.steps.total.output.result"}'


def test_show_without_steps_still_prints_the_json(run_cli: InProcessCli, tmp_path: Path) -> None:
    result = run_cli(tmp_path / "home", "--storage", str(_storage(tmp_path)), "show", "stats")
    assert json.loads(result.stdout)["execution_config"]["steps"] == STEPS


def test_show_steps_of_a_tool_without_steps_is_an_error_naming_it(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    result = run_cli(tmp_path / "home", "--storage", str(_storage(tmp_path)), "show", "Calculator", "--steps")
    line = assert_one_line_error(result)
    assert "'tool_calculator'" in line and "only skills have steps" in line


def test_plan_draws_the_planners_steps_and_prints_them_as_json(run_cli: InProcessCli, tmp_path: Path) -> None:
    storage = tmp_path / "plan-tools"
    registry = ToolRegistry(storage_dir=storage, allowed_modules=["AgentTools"])
    common = {"tool_type": "local", "execution_config": {"module": "AgentTools.json_tools.service",
                                                         "class": "JsonToolsService", "method": "run"}}  # fmt: skip
    registry.register({**common, "tool_id": "fetch_a", "name": "Fetch A", "capabilities": ["fetch"]})
    registry.register({**common, "tool_id": "fetch_b", "name": "Fetch B", "capabilities": ["fetch"],
                       "side_effect": "idempotent"})  # fmt: skip
    registry.register({**common, "tool_id": "summarise", "name": "Summarise", "capabilities": ["summarise"],
                       "dependencies": ["fetch_a"]})  # fmt: skip
    home = tmp_path / "home"

    drawn = run_cli(
        home, "--storage", str(storage), "--allow-module", "AgentTools", "plan", "fetch", "summarise"
    )
    assert drawn.returncode == 0, drawn.stderr
    lines = drawn.stdout.splitlines()
    assert lines[0] == "plan for fetch, summarise: 3 steps in 2 stages"
    assert lines[2].strip(" │") == "fallback → fetch_a"
    assert [line.split()[:4] for line in lines if line.startswith(("├─", "└─"))] == [
        ["├─", "[1]", "s1", "fetch_b"], ["├─", "[1]", "s2", "fetch_a"], ["└─", "[2]", "s3", "summarise"]
    ]  # fmt: skip
    as_json = run_cli(
        home, "--storage", str(storage), "--allow-module", "AgentTools", "plan", "fetch", "--json"
    )
    assert [s["tool"] for s in json.loads(as_json.stdout)["steps"]] == ["fetch_b"]
    unknown = run_cli(home, "--storage", str(storage), "--allow-module", "AgentTools", "plan", "fly")
    assert unknown.returncode != 0 and "'fly'" in unknown.stderr


def test_a_plan_with_inputs_that_are_not_an_object_is_an_error_naming_the_option(
    run_cli: InProcessCli, tmp_path: Path
) -> None:
    line = assert_one_line_error(run_cli(tmp_path / "home", "plan", "fetch", "--inputs", "[1]"))
    assert "--inputs must be a JSON object" in line


def test_render_steps_names_a_step_whose_dependencies_cannot_be_placed() -> None:
    drawing = render_steps("x", {"steps": [{"id": "a", "tool": "t", "depends_on": ["gone"]}]})
    assert "[0] a  t  after gone" in drawing
