"""The composite sample runs offline: a workflow calling a stored sub-workflow whose agent calls a skill."""

from __future__ import annotations

import importlib.util
import io
from pathlib import Path

import tests.workflow_bridge._compiler_support  # noqa: F401  (imports CrewAI with its ImportWarning muted)

SAMPLE = Path(__file__).resolve().parents[2] / "sample_workflows" / "composite" / "run_sample.py"


def test_the_composite_sample_runs_the_sub_workflow_and_its_skill(tmp_path):
    spec = importlib.util.spec_from_file_location("composite_sample", SAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()

    state = module.run(tmp_path / "storage", out=out)

    lines = out.getvalue().splitlines()
    # the lead's two tools run concurrently (CrewAI runs an answer's tool calls together): their lines
    # come in either order; the sub-workflow's inner calls always come before its own line
    (code_line,) = [line for line in lines if line.startswith("ok code_")]
    code_id = code_line.split()[1]  # the lead's Code tool: its main(values) is the tool
    assert code_line == f"ok {code_id} (agent agt_report_lead)"
    assert [line for line in lines if line != code_line] == [
        "  ok tool_calculator (agent agt_stats_statistician)",
        "  ok tool_calculator (agent agt_stats_statistician)",
        "  ok stats_skill (agent agt_stats_statistician)",
        "ok stats_workflow (agent agt_report_lead)",
    ]
    assert '\\"sum\\": 577, \\"mean\\": 115.4' in state["crew_result"]
    assert '"low": 88, "high": 143, "spread": 55' in state["crew_result"]  # the Code tool, in the sandbox
    done = [e["tool_id"] for e in state["tool_events"] if e["type"] == "tool.completed"]
    assert sorted(done) == sorted(["stats_workflow", code_id])
