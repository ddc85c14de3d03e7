"""Run the composite sample offline: a Quarterly Report workflow whose analyst calls the stored Stats
workflow as a `workflow` tool, whose statistician calls the `Sum and Mean` skill (two calculator calls),
and a Code tool whose `main(values)` runs in the code sandbox. With `--deployment`, the report is the
canvas `deployment.canvas.json`, whose analyst calls the Stats workflow through its deployment
(`workflows/deployments/dep_sample_stats.json`: the final version 1.0, in `production`).

    .venv/bin/python sample_workflows/composite/run_sample.py [--storage DIR] [--input TEXT] [--deployment]

Prints every tool call as it happens (the nested ones indented by their run), then the report.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PARENT_WORKFLOW = "wf_sample_report"


def run(
    storage: str | Path,
    user_input: str | None = None,
    out: Any = sys.stdout,
    history: Any = None,
    deployment: bool = False,
) -> dict[str, Any]:
    """Register AgentTools, the skill and the workflow tool into `storage`, run the report (recorded in
    `history`, a `RunHistory`, when given; `deployment`: the canvas calling the deployed Stats workflow);
    return the state."""
    from echo_tools import AgentStore, ToolExecutor, ToolRegistry, WorkflowStore
    from workflow_bridge.runner import run_workflow

    workflows, agents = WorkflowStore(HERE / "workflows"), AgentStore(HERE / "agents")
    registry = ToolRegistry(
        storage_dir=storage, discovery_dirs=[ROOT / "AgentTools"], workflows=workflows, agents=agents
    )
    registry.discover_local_tools()
    for definition in json.loads((HERE / "tools.json").read_text(encoding="utf-8")):
        registry.register(definition)
    workflow = workflows.get(PARENT_WORKFLOW)
    source: Any = {"workflow": workflow, "agents": {a: agents.get(a) for a in workflow["agents"]}}
    if deployment:
        source = json.loads((HERE / "deployment.canvas.json").read_text(encoding="utf-8"))
    executor = ToolExecutor(registry)

    def show(event: dict[str, Any]) -> None:
        if event.get("type") in ("tool.completed", "tool.failed"):
            depth = str(event.get("run_id") or "").count("/") // 2
            status = "ok " if event["type"] == "tool.completed" else "FAILED "
            out.write(f"{'  ' * depth}{status}{event['tool_id']} (agent {event.get('agent_id')})\n")

    executor.add_sink(lambda e: show(e.to_dict()))
    try:
        return run_workflow(
            source,
            registry=registry,
            executor=executor,
            user_input=user_input or workflow["metadata"]["default_input"],
            llm="rehearsal",
            history=history,
        )
    finally:
        executor.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", help="tool storage folder (default: a new temporary folder)")
    parser.add_argument("--input", help="the request (default: the workflow's metadata.default_input)")
    parser.add_argument("--deployment", action="store_true", help="call the Stats workflow by its deployment")
    args = parser.parse_args()
    from echo_tools.history import RunHistory

    # the run is recorded where `echo-tools runs` looks ($ECHO_TOOLS_HOME, else ./.echo_tools)
    history = RunHistory(os.environ.get("ECHO_TOOLS_HOME") or ".echo_tools")
    try:
        state = run(
            args.storage or tempfile.mkdtemp(prefix="echo-tools-composite-"),
            args.input,
            history=history,
            deployment=args.deployment,
        )
    finally:
        history.close()
    sys.stdout.write(f"\ncrew_result:\n{state.get('crew_result')}\n")
    sys.stdout.write(f"see this run again: echo-tools runs show {state.get('run_id')}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
