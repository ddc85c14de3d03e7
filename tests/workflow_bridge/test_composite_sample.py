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
    code_id = lines[-1].split()[1]
    assert code_id.startswith("code_")  # the lead's Code tool: its main(values) is the tool
    assert lines == [
        "  ok tool_calculator (agent agt_stats_statistician)",
        "  ok tool_calculator (agent agt_stats_statistician)",
        "  ok stats_skill (agent agt_stats_statistician)",
        "ok stats_workflow (agent agt_report_lead)",
        f"ok {code_id} (agent agt_report_lead)",
    ]
    assert '\\"sum\\": 577, \\"mean\\": 115.4' in state["crew_result"]
    assert '"low": 88, "high": 143, "spread": 55' in state["crew_result"]  # the Code tool, in the sandbox
    done = [e["tool_id"] for e in state["tool_events"] if e["type"] == "tool.completed"]
    assert done == ["stats_workflow", code_id]
