"""`workflow_bridge.echoai_host`: EchoAI's own `workflow.executor`, HITL manager and `workflow.node_mapper`
answered by echo-tools once `install` sees EchoAI's services in the container: a run started through
EchoAI's executor pauses at its HITL node and resumes through EchoAI's HITL methods or the mounted
`/workflows/runs/{run_id}/resume`, from another process too; a reopened canvas saves again."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.workflow_bridge._compiler_support import agent, chain
from workflow_bridge import echoai
from workflow_bridge.echoai_host import EchoAINodeMapper, EchoAIWorkflowExecutor

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "echoai"


class Container:
    """EchoAI's `echolib.di.Container` (an unknown name raises KeyError)."""

    def __init__(self) -> None:
        self.providers: dict[str, Callable[[], Any]] = {}

    def register(self, key: str, provider: Callable[[], Any]) -> None:
        self.providers[key] = provider

    def resolve(self, key: str) -> Any:
        if key not in self.providers:
            raise KeyError(f"no provider for {key}")
        return self.providers[key]()


class AgentRegistry:
    """EchoAI's AgentRegistry: a cache, and the agent files in `storage_dir`."""

    def __init__(self, agents: dict[str, Any], storage_dir: Path) -> None:
        self.cache = agents
        self.storage_dir = storage_dir

    def get_agent(self, agent_id: str) -> Any:
        return self.cache.get(agent_id)


class HostExecutor:
    """EchoAI's WorkflowExecutor: the loader and the agent registry the replacement reuses."""

    def __init__(self, workflows: dict[str, Any], agents: AgentRegistry) -> None:
        self.workflows = workflows
        self.agent_registry = agents
        self.storage = object()

    def load_for_execution(self, workflow_id: str, mode: str, version: str | None = None) -> Any:
        if (workflow_id, mode) not in self.workflows:
            raise FileNotFoundError(workflow_id)
        return self.workflows[(workflow_id, mode)]


def _gated() -> tuple[dict[str, Any], dict[str, Any]]:
    return chain(
        agent("start", "Start"),
        agent("gate", "HITL", metadata={"hitl_config": {"title": "Ship it?"}}),
        agent("end", "End", output_schema=["result"]),
    )


def _echoai(tmp_path: Path, *, on_disk: bool = False) -> tuple[Container, Any]:
    wf, agents = _gated()
    folder = tmp_path / "agents"
    folder.mkdir()
    cached = dict(agents)
    if on_disk:  # saved by the canvas route through EchoAI's other registry: only the file knows it
        (folder / "gate.json").write_text(json.dumps(cached.pop("gate")))
    container = Container()
    store = tmp_path / "tools"
    echoai.install(container, storage_dir=store)  # as in EchoAI: before its workflow container
    container.register("workflow.executor", lambda: HostExecutor({("wf_test", "test"): wf}, registry))
    registry = AgentRegistry(cached, folder)
    layer = echoai.install(container, storage_dir=store)  # again, EchoAI's services registered now
    return container, layer


def _pause(container: Container) -> dict[str, Any]:
    answer = container.resolve("workflow.executor").execute_workflow(
        "wf_test", "draft", None, {"message": "release 1.2", "run_id": "their-metadata"}
    )
    assert answer["status"] == "interrupted", answer
    return answer


def test_install_answers_echoais_executor_and_the_run_pauses_recorded(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    executor = container.resolve("workflow.executor")
    assert isinstance(executor, EchoAIWorkflowExecutor)
    assert isinstance(container.resolve("workflow.node_mapper"), EchoAINodeMapper)
    assert container.resolve("workflow.hitl") is layer.hitl_manager
    answer = _pause(container)  # draft not found: EchoAI's fallback to the temp copy
    assert answer["hitl"]["title"] == "Ship it?"
    assert answer["output"]["run_id"] == answer["run_id"]  # the payload's run_id is metadata only
    assert layer.history.run(answer["run_id"])["status"] == "interrupted"
    echoai.install(container, storage_dir=tmp_path / "tools")  # a third call keeps one replacement
    assert container.resolve("workflow.executor") is executor


def test_echoais_hitl_routes_approve_through_the_replaced_manager(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    run_id = _pause(container)["run_id"]
    hitl = layer.hitl_manager()  # EchoAI's routes call `HITLManager()`
    assert hitl.get_status(run_id)["state"] == "waiting_for_human"
    assert hitl.get_status(run_id)["blocked_at"] == "gate"
    assert [p["run_id"] for p in hitl.list_pending_reviews()] == [run_id]
    assert hitl.get_context(run_id).to_dict()["request"]["title"] == "Ship it?"
    answer = hitl.approve(run_id=run_id, actor="me", rationale="fine")
    assert answer["status"] == "approved" and answer["run_status"] == "completed"
    assert answer["output"]["original_user_input"] == "release 1.2" and "result" in answer["output"]
    assert [d.to_dict()["decision"] for d in hitl.get_decisions(run_id)] == ["approve"]
    assert hitl.list_pending_reviews() == [] and hitl.get_context(run_id) is None
    with pytest.raises(ValueError, match="'completed', not 'interrupted'"):
        hitl.approve(run_id=run_id, actor="me")


def test_reject_ends_the_run_saying_why_and_modify_edits_the_result(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    rejected = hitl.reject(run_id=_pause(container)["run_id"], actor="me", rationale="not yet")
    assert rejected["status"] == "rejected" and "not yet" in rejected["output"]["result"]
    edited = hitl.modify(
        run_id=_pause(container)["run_id"], actor="me", changes={"edited_output": "release 1.3"}
    )
    assert edited["status"] == "modified" and edited["output"]["result"] == "release 1.3"


def test_a_bad_decision_or_an_unknown_run_is_a_value_error_naming_it(tmp_path: Path) -> None:
    container, layer = _echoai(tmp_path)
    hitl = layer.hitl_manager()
    run_id = _pause(container)["run_id"]
    with pytest.raises(ValueError, match="edits must be an object") as caught:
        hitl.modify(run_id=run_id, actor="me", changes="not an object")
    assert "'not an object'" in str(caught.value)
    assert layer.history.run(run_id)["status"] == "interrupted"  # the refused decision took nothing
    with pytest.raises(ValueError, match="no recorded run has run_id 'run_nope'"):
        hitl.approve(run_id="run_nope", actor="me")
    assert hitl.get_context("run_nope") is None


def test_a_run_started_by_echoais_executor_resumes_through_the_mounted_route(tmp_path: Path) -> None:
    container, _ = _echoai(tmp_path)
    run_id = _pause(container)["run_id"]
    app = FastAPI()
    echoai.mount(app, storage_dir=tmp_path / "tools")
    client = TestClient(app, base_url="http://127.0.0.1")
    assert client.get(f"/workflows/runs/{run_id}").json()["status"] == "interrupted"
    resumed = client.post(
        f"/workflows/runs/{run_id}/resume", json={"decision": "edit", "edits": {"crew_result": "v2"}}
    )
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["status"] == "completed" and resumed.json()["state"]["result"] == "v2"


async def test_called_on_a_running_event_loops_thread_a_crewai_run_completes_and_resumes(
    tmp_path: Path,
) -> None:
    container, layer = _echoai(tmp_path)
    wf, agents = chain(
        agent("adder", "Agent", tools=["tool_calculator"]),
        agent("gate", "HITL"),
        agent("end", "End", output_schema=["result"]),
    )
    host = HostExecutor({("wf_sum", "final"): wf}, AgentRegistry(agents, tmp_path))
    executor = EchoAIWorkflowExecutor(host, layer)
    # EchoAI's async routes call it on the loop's own thread
    answer = executor.execute_workflow(
        "wf_sum", "final", "1", {"message": '{"operation": "add", "values": [2, 3]}'}
    )
    assert answer["status"] == "interrupted", answer.get("error")
    assert [e["type"] for e in answer["output"]["tool_events"]] == ["tool.invoked", "tool.completed"]
    resumed = layer.hitl_manager().approve(run_id=answer["run_id"])
    assert resumed["run_status"] == "completed" and '"result": 5' in resumed["output"]["result"]


def test_agents_known_only_on_disk_are_read_and_unsafe_ids_are_not(tmp_path: Path) -> None:
    container, _ = _echoai(tmp_path, on_disk=True)
    assert _pause(container)["hitl"]["title"] == "Ship it?"
    executor = container.resolve("workflow.executor")
    (tmp_path / "secret.json").write_text(json.dumps({"agent_id": "x"}))
    assert executor._agents({"agents": ["../secret", "gate"]}) == {
        "gate": json.loads((tmp_path / "agents" / "gate.json").read_text())
    }


def test_a_failed_run_is_echoais_failed_answer_not_an_exception(tmp_path: Path) -> None:
    container, _ = _echoai(tmp_path)
    with pytest.raises(FileNotFoundError):
        container.resolve("workflow.executor").execute_workflow("wf_missing", "final", "1")
    wf, agents = chain(agent("a", "Agent", tools=["tool_no_such_tool"]))
    executor = EchoAIWorkflowExecutor(
        HostExecutor({("wf_bad", "final"): wf}, AgentRegistry(agents, tmp_path)),
        container.resolve("workflow.executor").layer,
    )
    answer = executor.execute_workflow("wf_bad", "final", "1")
    assert answer["status"] == "failed" and "tool_no_such_tool" in answer["error"]


def _canvas() -> dict[str, Any]:
    data = json.loads((FIXTURES / "canvases" / "marketScan.json").read_text())
    return {"canvas_nodes": data["nodes"], "connections": data["connections"]}


def test_a_reopened_canvas_saves_again_with_the_same_agents_and_tools(tmp_path: Path) -> None:
    container, _ = _echoai(tmp_path)
    mapper = container.resolve("workflow.node_mapper")
    canvas = _canvas()
    workflow, agents = mapper.map_frontend_to_backend(canvas["canvas_nodes"], canvas["connections"])
    nodes, connections = mapper.map_backend_to_frontend(workflow, agents)  # the IDE reopens it
    again, agents_again = mapper.map_frontend_to_backend(
        nodes, connections, workflow_name=workflow["name"], workflow_id=workflow["workflow_id"]
    )
    assert sorted(agents_again) == sorted(agents)
    assert {a: agents_again[a]["tools"] for a in agents} == {a: agents[a]["tools"] for a in agents}
    assert again["connections"] == workflow["connections"]


def test_a_canvas_with_an_unknown_tool_is_refused_naming_it(tmp_path: Path) -> None:
    container, _ = _echoai(tmp_path)
    canvas = _canvas()
    node = next(n for n in canvas["canvas_nodes"] if n["type"] == "Agent")
    node["config"]["tools"] = ["No Such Tool"]
    with pytest.raises(ValueError, match="No Such Tool"):
        container.resolve("workflow.node_mapper").map_frontend_to_backend(
            canvas["canvas_nodes"], canvas["connections"]
        )
