"""Failsafe and Self-Review nodes, and agents' timeouts, on real compiled graphs: the API node's request
really goes to an HTTP server on 127.0.0.1 that fails (or answers slowly, or better each time), and the
review is scored by the rehearsal's fixed rule, or by a model served on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.workflow_bridge._compiler_support import agent, agent_tools_registry, make_executor, run, workflow
from tests.workflow_bridge._openai_server import scripted_openai_server
from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler
from workflow_bridge.llm import llm_from_spec


class Service:
    """A loopback HTTP server answering GET with `answers[i]` for the i-th request (the last one repeated):
    `(status, body dict)`; `hold` makes it wait (bounded) before answering."""

    def __init__(self, answers: list[tuple[int, dict[str, Any]]]) -> None:
        self.answers = answers
        self.hits = 0
        self.hold = threading.Event()
        self.hold.set()
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                index = service.hits
                service.hits += 1
                service.hold.wait(30)
                status, body = service.answers[min(index, len(service.answers) - 1)]
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a timeout test)
                    pass

            def log_message(self, format: str, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/data"

    def close(self) -> None:
        self.hold.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def service(monkeypatch) -> Iterator[Any]:
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")
    made: list[Service] = []

    def make(answers: list[tuple[int, dict[str, Any]]]) -> Service:
        made.append(Service(answers))
        made[-1].thread.start()
        return made[-1]

    yield make
    for s in made:
        s.close()


@pytest.fixture(scope="module")
def registry():
    return agent_tools_registry()


def failsafe_workflow(url: str, **failsafe: Any):
    """Start -> Failsafe -> Fetch (API) -> Report (Template) -> End; Failsafe's failure edge -> Fallback."""
    config = {"retryAttempts": 2, "timeout": 30, **failsafe}
    return workflow(
        [
            agent("start", "Start"),
            agent(
                "guard", "Failsafe", name="Guard", metadata={"failsafe_config": config, "canvas_node_id": 7}
            ),
            agent("fetch", "API", name="Fetch", metadata={"api_config": {"method": "GET", "url": url}}),
            agent(
                "report",
                "Template",
                name="Report",
                metadata={"template_config": {"template": "got {{ previous.json.value }}"}},
            ),
            agent(
                "fallback",
                "Template",
                name="Fallback",
                metadata={"template_config": {"template": "fallback used"}},
            ),
            agent("end", "End", output_schema=["result"]),
        ],
        [
            ("start", "guard"),
            ("guard", "fetch"),
            ("guard", "fallback"),
            ("fetch", "report"),
            ("report", "end"),
            ("fallback", "end"),
        ],
    )


def test_a_failsafe_retries_a_failing_api_node_then_takes_its_failure_edge(registry, service):
    failing = service([(500, {"error": "down"})])
    executor, _ = make_executor(registry)
    wf, agents = failsafe_workflow(failing.url)
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "fetch it")
    assert failing.hits == 3  # the first attempt and retryAttempts=2 more
    assert state["result"] == "fallback used"
    names = [m["name"] for m in state["messages"]]
    assert "Report" not in names and names.count("Fetch") == 3
    (summary,) = [m for m in state["messages"] if m.get("error_type") == "failsafe"]
    assert (
        summary["status"] == "failed" and "'Guard'" in summary["error"] and "canvas id 7" in summary["error"]
    )
    assert "failed 3 time(s)" in summary["error"] and "HTTP 500" in summary["error"]


def test_a_failsafe_goes_on_when_a_retry_succeeds(registry, service):
    flaky = service([(503, {}), (200, {"value": 42})])
    executor, _ = make_executor(registry)
    wf, agents = failsafe_workflow(flaky.url)
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "fetch it")
    assert flaky.hits == 2 and state["result"] == "got 42"


def test_a_failsafe_timeout_stops_a_slow_attempt(registry, service):
    slow = service([(200, {"value": 1})])
    slow.hold.clear()  # answers only when the test ends
    executor, log = make_executor(registry)
    wf, agents = failsafe_workflow(slow.url, retryAttempts=0, timeout=0.5)
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "fetch it")
    assert state["result"] == "fallback used"
    assert [e.type for e in log.events if e.tool_id == "tool_http_request"][-1] == "tool.timeout"


def test_a_failsafe_around_nothing_or_a_start_node_is_a_compile_error(registry):
    executor, _ = make_executor(registry)
    wf, agents = workflow(
        [agent("start", "Start"), agent("guard", "Failsafe", name="Guard")], [("start", "guard")]
    )
    with pytest.raises(WorkflowCompileError, match="guards nothing") as caught:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    assert caught.value.node_id == "guard" and caught.value.field == "connections"
    wf, agents = failsafe_workflow("http://127.0.0.1:9/x", retryAttempts=-1)
    with pytest.raises(WorkflowCompileError) as caught:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    assert caught.value.field == "config.retryAttempts" and "-1" in str(caught.value)


def review_workflow(url: str, rounds: int = 3, threshold: float = 0.8):
    """Start -> Fetch (API) -> Check (Self-Review) -> End."""
    review = {
        "checkCompleteness": True,
        "checkAccuracy": True,
        "confidenceThreshold": threshold,
        "maxIterations": rounds,
    }
    return workflow(
        [
            agent("start", "Start"),
            agent("fetch", "API", name="Fetch", metadata={"api_config": {"method": "GET", "url": url}}),
            agent("check", "Self-Review", name="Check", metadata={"review_config": review}),
            agent("end", "End", output_schema=["result"]),
        ],
        [("start", "fetch"), ("fetch", "check"), ("check", "end")],
    )


def test_a_self_review_below_threshold_runs_the_node_again_once(registry, service):
    improving = service([(200, {"text": "alpha beta"}), (200, {"text": "alpha beta gamma delta"})])
    executor, _ = make_executor(registry)
    wf, agents = review_workflow(improving.url)
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "alpha beta gamma delta")
    assert improving.hits == 2
    reviews = [m for m in state["messages"] if m["name"] == "Check"]
    assert [(r["status"], r["score"]) for r in reviews] == [("revise", 0.75), ("completed", 1.0)]
    assert "gamma, delta" in reviews[0]["issues"]
    assert "gamma delta" in state["result"] and state["review_feedback"] is None


def test_a_self_review_that_stays_below_threshold_stops_at_its_bound_with_a_failed_entry(registry, service):
    poor = service([(200, {"text": "alpha"})])
    executor, _ = make_executor(registry)
    wf, agents = review_workflow(poor.url, rounds=2)
    state = run(WorkflowCompiler(registry, executor).compile(wf, agents), "alpha beta gamma delta")
    assert poor.hits == 2
    last = [m for m in state["messages"] if m["name"] == "Check"][-1]
    assert last["status"] == "failed" and "below confidenceThreshold 0.80, after 2 round(s)" in last["error"]


def test_a_self_review_asks_its_model_for_the_score(registry, service):
    answer = service([(200, {"text": "a draft"})])
    executor, _ = make_executor(registry)
    wf, agents = review_workflow(answer.url)
    steps = ['{"score": 0.3, "issues": "too short"}', 'Here: {"score": 0.95, "issues": ""}']
    with scripted_openai_server(steps) as server:
        llm = llm_from_spec(f"{server.url}#gpt-4o-mini")
        state = run(WorkflowCompiler(registry, executor, llm=llm).compile(wf, agents), "write the report")
    assert len(server.requests) == 2 and answer.hits == 2
    assert "OUTPUT TO REVIEW" in server.requests[0]["messages"][-1]["content"]
    assert [m["score"] for m in state["messages"] if m["name"] == "Check"] == [0.3, 0.95]


def test_a_self_review_with_a_threshold_out_of_range_is_a_compile_error(registry):
    executor, _ = make_executor(registry)
    wf, agents = review_workflow("http://127.0.0.1:9/x", threshold=1.5)
    with pytest.raises(WorkflowCompileError) as caught:
        WorkflowCompiler(registry, executor).compile(wf, agents)
    assert caught.value.field == "config.confidenceThreshold" and "1.5" in str(caught.value)


def test_an_agent_that_passes_its_timeout_stops_and_the_run_fails_naming_it(tmp_path):
    from echo_tools.executor import ToolExecutor
    from echo_tools.registry import ToolRegistry
    from tests.workflow_bridge import _flow_tools
    from workflow_bridge.crewai_adapter import AgentNodeError

    module = "tests.workflow_bridge._flow_tools"
    registry = ToolRegistry(allowed_modules=[module])
    registry.register(
        {
            "name": "Stall",
            "description": "Waits.",
            "tool_type": "local",
            "input_schema": {
                "type": "object",
                "properties": {"reason": {"type": "string"}},
                "required": ["reason"],
            },
            "execution_config": {"module": module, "function": "stall"},
        }
    )
    executor = ToolExecutor(registry)
    slow = agent("slow", tools=["Stall"], name="Slow Agent")
    slow["constraints"] = {"timeout_seconds": 1}
    wf, agents = workflow([slow], [])
    _flow_tools.RELEASE.clear()
    try:
        with pytest.raises(AgentNodeError) as caught:
            run(WorkflowCompiler(registry, executor).compile(wf, agents), "wait")
    finally:
        _flow_tools.RELEASE.set()
    assert "'Slow Agent' (slow)" in str(caught.value) and "did not finish within 1 s" in str(caught.value)
