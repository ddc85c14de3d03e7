"""A canvas's Subworkflow Deployment tool runs the workflow version its deployment names (a published final
version in the WorkflowStore, read at every call), another version after a redeploy, and a deployment at a
remote endpoint through the one outbound client."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from echo_tools.egress import EgressPolicy
from echo_tools.errors import NotStoredError
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from echo_tools.stores import AgentStore, WorkflowStore
from tests.workflow_bridge._mapper_support import chain, node
from workflow_bridge.node_mapper import NodeMapper
from workflow_bridge.runner import run_workflow


def publish(store: WorkflowStore, agents: AgentStore, version: str, says: str) -> None:
    """Save a final version of `wf_child` (Start -> Template -> End) whose result is `says: <request>`.

    Each version's nodes are new canvas nodes (new agent ids): a stored version names its agents by id,
    and the agent files are shared by every version that names them."""
    base = 10 * int(version)
    canvas = chain(
        node(base + 1, "Start"),
        node(base + 2, "Template", name="Answer", template=f"{says}: {{{{ input }}}}", engine="jinja2"),
        node(base + 3, "End", outputVariables=[{"name": "result", "type": "string"}]),
        workflow_id="wf_child",
    )
    mapped = NodeMapper(None).map_canvas(canvas)
    assert mapped.ok, mapped.diagnostics
    store.save({**mapped.workflow, "version": version, "status": "final"}, "final")
    for agent in mapped.agents.values():
        agents.save(agent)


@pytest.fixture
def stores(tmp_path: Path) -> tuple[WorkflowStore, AgentStore, ToolRegistry]:
    workflows, agents = WorkflowStore(tmp_path / "workflows"), AgentStore(tmp_path / "agents")
    publish(workflows, agents, "1", "version one")
    publish(workflows, agents, "2", "version two")
    registry = ToolRegistry(storage_dir=tmp_path / "tools", workflows=workflows, agents=agents)
    return workflows, agents, registry


def parent(environment: str = "production") -> dict[str, Any]:
    entry = {"id": 9, "name": "Child", "type": "subworkflow_deployment", "enabled": True,
             "config": {"deploymentId": "dep_child", "environment": environment}}  # fmt: skip
    return chain(
        node(1, "Start"),
        node(2, "Agent", name="Caller", tools=[entry]),
        node(3, "End"),
        workflow_id="wf_parent",
    )


def test_a_deployment_runs_the_deployed_version_and_another_after_a_redeploy(stores):
    workflows, _, registry = stores
    workflows.deploy("dep_child", "wf_child", "1")
    executor = ToolExecutor(registry)
    mapped = NodeMapper(registry).map_canvas(parent())
    assert mapped.ok, mapped.diagnostics
    source = {"workflow": mapped.workflow, "agents": mapped.agents}

    first = run_workflow(source, registry=registry, executor=executor, user_input="hello", run_id="run_1")
    assert "version one: hello" in first["result"]
    workflows.deploy("dep_child", "wf_child", "2")  # a redeploy: the same canvas, nothing saved again
    second = run_workflow(source, registry=registry, executor=executor, user_input="hello", run_id="run_2")
    assert "version two: hello" in second["result"] and "version one" not in second["result"]
    tool = registry.require("deployment_dep_child_production")
    assert tool.execution_config == {"deployment_id": "dep_child", "environment": "production"}
    executor.close()


def test_deploying_a_version_that_is_not_published_is_refused_naming_it(stores):
    workflows, _, _ = stores
    with pytest.raises(NotStoredError, match="no final version '7'"):
        workflows.deploy("dep_child", "wf_child", "7")
    with pytest.raises(ValueError, match="environment 'prod uction'"):
        workflows.deploy("dep_child", "wf_child", "1", environment="prod uction")
    workflows.deploy("dep_child", "wf_child")  # no version: the newest final one
    assert workflows.deployment("dep_child")["version"] == "2"
    with pytest.raises(NotStoredError, match="has no environment 'staging'"):
        workflows.deployment("dep_child", "staging")


@pytest.fixture
def remote() -> Iterator[dict[str, Any]]:
    """A loopback server that runs 'the workflow' remotely: it answers each POST with what it was sent."""
    seen: dict[str, Any] = {"bodies": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
            seen["bodies"].append(body)
            data = json.dumps({"result": f"remote ran: {body.get('user_input')}"}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    seen["url"] = f"http://127.0.0.1:{server.server_address[1]}/run"
    yield seen
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def test_a_deployment_at_a_remote_endpoint_runs_there_through_the_outbound_client(stores, remote):
    workflows, agents, default = stores
    workflows.deploy("dep_child", endpoint=remote["url"], environment="staging")
    (refused,) = (
        NodeMapper(default).map_canvas(parent("staging")).errors
    )  # loopback: the egress policy says no
    assert "'dep_child'" in refused.message and "ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK" in refused.message
    registry = ToolRegistry(workflows=workflows, agents=agents, egress=EgressPolicy.local())
    executor = ToolExecutor(registry, egress=EgressPolicy.local())
    mapped = NodeMapper(registry).map_canvas(parent("staging"))
    assert mapped.ok, mapped.diagnostics
    state = run_workflow(
        {"workflow": mapped.workflow, "agents": mapped.agents},
        registry=registry, executor=executor, user_input="hi there", run_id="run_remote",
    )  # fmt: skip
    assert remote["bodies"] == [{"user_input": "hi there"}]
    assert "remote ran: hi there" in state["result"]
    assert registry.require("deployment_dep_child_staging").tool_type.value == "api"
    executor.close()
