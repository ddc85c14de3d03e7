"""API, Code and Conditional nodes with the real AgentTools: the API + Conditional sample end to end, with
its risk service served on 127.0.0.1, routing both ways on the score the Code node extracts."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.workflow_bridge._compiler_support import agent, agent_tools_registry, chain, make_executor, run
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.runner import run_workflow

SAMPLE = Path(__file__).resolve().parents[2] / "sample_workflows" / "api_conditional.canvas.json"


@pytest.fixture(scope="module")
def registry():
    return agent_tools_registry()


@pytest.fixture
def risk_service():
    """A loopback HTTP server answering every GET with the current `body` (a dict)."""
    served = {"body": {"risk_score": 82, "customer": "ACME Corp"}}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = json.dumps(served["body"]).encode()
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
    served["url"] = f"http://127.0.0.1:{server.server_address[1]}/risk.json"
    yield served
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


def sample_with(url: str) -> dict:
    canvas = json.loads(SAMPLE.read_text())
    for node in canvas["canvas_nodes"]:
        if node["type"] == "API":
            node["config"]["url"] = url
    return canvas


@pytest.mark.parametrize(
    ("score", "taken", "skipped"),
    [(82, "Escalation Writer", "Approval Writer"), (35, "Approval Writer", "Escalation Writer")],
)
def test_the_api_and_conditional_sample_routes_on_the_fetched_score(
    registry, risk_service, monkeypatch, score, taken, skipped
):
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")
    risk_service["body"] = {"risk_score": score, "customer": "ACME Corp"}
    executor, _ = make_executor(registry)
    state = run_workflow(
        sample_with(risk_service["url"]), registry=registry, executor=executor, run_id=f"run_{score}"
    )
    names = [m["name"] for m in state["messages"]]
    assert taken in names and skipped not in names
    done = [e["tool_id"] for e in state["tool_events"] if e["type"] == "tool.completed"]
    assert done == ["tool_http_request", "tool_code_executor"]  # no LLM played the API or Code node
    assert state["risk_score"] == str(score)  # the Code node's printed output, in its output variable


def test_a_code_node_reads_workflow_values_by_name_and_its_output_is_what_it_printed(registry):
    executor, _ = make_executor(registry)
    code = {
        "language": "python",
        "code": "price = base * (0.9 if win_probability < 50 else 1.0)\nprint(f'price={price:.0f}')",
    }
    wf, agents = chain(
        agent("calc", "Code", metadata={"code_config": code}),
        agent("end", "End", output_schema=["result"]),
        state_schema={"base": "number"},
    )
    graph = WorkflowCompiler(registry, executor).compile(wf, agents)
    state = run(graph, "price it", base=1000, crew_result="win_probability: 30")
    assert state["result"] == "price=900"


def test_a_failing_code_node_is_recorded_and_the_run_goes_on(registry):
    executor, _ = make_executor(registry)
    wf, agents = chain(
        agent("calc", "Code", metadata={"code_config": {"code": "raise SystemExit('no data')"}}),
        agent("end", "End", output_schema=["result"]),
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "x")
    failed = state["messages"][0]
    assert failed["status"] == "failed" and "no data" in failed["error"]
    assert state["messages"][-1]["agent"] == "end"


def test_an_api_node_whose_tool_is_not_registered_fails_when_it_runs(monkeypatch):
    from tests.workflow_bridge._compiler_support import make_registry

    registry = make_registry()
    registry.delete("tool_http_request")
    executor, _ = make_executor(registry)
    wf, agents = chain(
        agent("call", "API", metadata={"api_config": {"method": "GET", "url": "https://x.example"}})
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "x")
    assert state["messages"][0]["status"] == "failed" and state["messages"][0]["error_type"] == "not_found"


def test_an_mcp_node_calls_its_servers_tool_through_the_executor():
    from tests.echo_tools._mcp_support import make_executor as mcp_executor
    from tests.echo_tools._mcp_support import make_registry as mcp_registry
    from tests.echo_tools._mcp_support import stdio_config

    registry = mcp_registry()
    registry.add_mcp_server("calc", stdio_config())
    executor = mcp_executor(registry)
    mcp = {"serverId": "calc", "operation": "add", "arguments": {"b": 5}}
    wf, agents = chain(
        agent("sum", "MCP", metadata={"mcp_config": mcp}), agent("end", "End", output_schema=["result"])
    )
    try:
        graph = WorkflowCompiler(registry, executor).compile(wf, agents)
        state = run(graph, 'Add these: {"a": 37}')
    finally:
        executor.close()
    (done,) = [e for e in state["tool_events"] if e["type"] == "tool.completed"]
    assert done["agent_id"] == "sum" and done["tool_type"] == "mcp"
    assert json.loads(state["result"]) == {"result": 42.0}


def test_the_end_node_keeps_output_values_earlier_nodes_produced(registry):
    executor, _ = make_executor(registry)
    code = {"code": "print(1234)"}
    wf, agents = chain(
        agent("price", "Code", metadata={"code_config": code}, output_schema=["final_price"]),
        agent("writer", tools=[], role="Writer"),
        agent("end", "End", output_schema=["final_price", "summary"]),
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "quote")
    assert state["final_price"] == "1234"
    assert state["summary"] == state["result"] == state["crew_result"]
    assert "[rehearsal] Writer" in state["summary"]


def test_an_api_node_fills_its_output_keys_from_the_response_body_not_from_the_status_line(
    registry, risk_service, monkeypatch
):
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")
    risk_service["body"] = {"risk_score": 40, "customer": "ACME Corp"}
    executor, _ = make_executor(registry)
    wf, agents = chain(
        agent(
            "call",
            "API",
            output_schema=["risk_score"],
            metadata={"api_config": {"method": "GET", "url": risk_service["url"]}},
        )
    )
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "x")
    assert state["messages"][0]["status"] == "completed"
    assert state["risk_score"] == 40  # the body's value, not the 200 that leads the response text


def test_a_code_node_that_exits_1_is_listed_among_the_runs_failed_calls(registry, tmp_path: Path):
    from echo_tools.history import RunHistory

    executor, _ = make_executor(registry)
    wf, agents = chain(
        agent("calc", "Code", metadata={"code_config": {"code": "import sys\nsys.exit(1)"}}),
        agent("end", "End", output_schema=["result"]),
    )
    history = RunHistory(tmp_path)
    run_workflow(
        {"workflow": wf, "agents": agents},
        registry=registry,
        executor=executor,
        run_id="run_exit",
        history=history,
    )
    record = history.run("run_exit")
    assert record is not None and record["status"] == "completed_with_errors"
    (listed,) = record["source"]["failed_calls"]  # the tool ran; its node failed it: listed once
    assert (listed["tool_id"], listed["node_id"]) == ("tool_code_executor", "calc")
    assert "exited with 1" in listed["error"]
