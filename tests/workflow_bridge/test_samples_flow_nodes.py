"""The samples of the nodes that shape a run (Loop, Map, Template, Failsafe, Self-Review, a Subworkflow
Deployment) run offline as documented in sample_workflows/README.md: the rehearsal model, real tools."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

import tests.workflow_bridge._compiler_support  # noqa: F401  (imports CrewAI with its ImportWarning muted)
from echo_tools.events import MemoryEventLog
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from workflow_bridge.runner import run_workflow

SAMPLES = Path(__file__).resolve().parents[2] / "sample_workflows"


@pytest.fixture(scope="module")
def registry() -> ToolRegistry:
    reg = ToolRegistry(discovery_dirs=[SAMPLES.parent / "AgentTools"])
    reg.discover_local_tools()
    return reg


def _run(registry: ToolRegistry, name: str) -> tuple[dict[str, Any], list[Any], str]:
    log = MemoryEventLog()
    events: list[dict[str, Any]] = []
    executor = ToolExecutor(registry, event_sinks=[log])
    try:
        state = run_workflow(
            SAMPLES / f"{name}.canvas.json", registry=registry, executor=executor, llm="rehearsal",
            run_id=f"run_{name}", on_event=events.append,
        )  # fmt: skip
    finally:
        executor.close()
    (finished,) = [e for e in events if e["type"] == "run.finished"]
    return state, log.events, finished["status"]


def test_the_loop_sample_totals_each_order_in_turn(registry):
    state, events, status = _run(registry, "loop")
    calls = [e.input["values"] for e in events if e.type == "tool.invoked"]
    assert calls == [[12, 30], [7, 8, 9], [100, 250]] and status == "completed"
    totals = json.loads(state["result"])
    assert ['"result": 42' in t for t in totals] == [True, False, False] and '"result": 350' in totals[2]


def test_the_map_sample_takes_the_roots_in_parallel_and_lists_them_in_order(registry):
    state, events, status = _run(registry, "map")
    assert len([e for e in events if e.type == "tool.completed"]) == 6 and status == "completed"
    roots = [line for line in state["result"].splitlines() if "result" in line]
    assert [f'"result": {n}.0' in r for n, r in zip(range(2, 8), roots, strict=True)] == [True] * 6


def test_the_template_sample_renders_the_letter_without_a_model_or_a_tool(registry):
    state, events, status = _run(registry, "template")
    assert events == [] and status == "completed"
    assert state["result"].startswith("Dear Ada Lovelace,\n\nyour invoice of 120.50 EUR is due for:\n")


def test_the_failsafe_sample_retries_the_rate_service_then_takes_its_failure_edge(registry):
    state, events, status = _run(registry, "failsafe")
    assert [e.type for e in events if e.tool_id == "tool_http_request"].count("tool.failed") == 3
    assert state["result"].startswith("The rate service did not answer") and status == "completed_with_errors"


def test_the_self_review_sample_scores_the_draft_and_lets_it_pass(registry):
    state, _, status = _run(registry, "self_review")
    (review,) = [m for m in state["messages"] if m["name"] == "Quality Check"]
    assert (review["status"], review["score"]) == ("completed", 1.0) and status == "completed"


def test_the_deployment_sample_runs_the_stats_workflow_its_deployment_names(tmp_path):
    spec = importlib.util.spec_from_file_location("composite_sample", SAMPLES / "composite" / "run_sample.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = io.StringIO()
    state = module.run(tmp_path / "storage", out=out, deployment=True)
    assert "ok deployment_dep_sample_stats_production (agent " in out.getvalue()
    assert '\\"sum\\": 577, \\"mean\\": 115.4' in state["crew_result"]
