"""resume_run of a run paused at an MCP server's question (elicitation): the person's answer goes back
to the server from a fresh graph and process state, and answers that cannot fit are 422s naming the field.

The run is paused once per module (the pause starts the server twice: discovery and the call); each test
resumes its own copy of that storage folder, so every test starts from the same untouched pause.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools.events import MemoryEventLog
from echo_tools.executor import ToolExecutor
from echo_tools.history import RunHistory
from echo_tools.registry import ToolRegistry
from tests.echo_tools._mcp_support import SERVERS, stdio_config
from tests.workflow_bridge._compiler_support import agent, chain, make_executor, make_registry
from workflow_bridge.runner import RunResumeError, resume_run, run_status, run_workflow

TOOL = "mcp_asking_ask_contact"


def _source() -> dict:
    wf, agents = chain(agent("clerk", tools=[TOOL]), agent("end", "End", output_schema=["result"]))
    return {"workflow": wf, "agents": agents}


@pytest.fixture(scope="module")
def asking_registry() -> ToolRegistry:
    """The fixture tools and the asking server's tools (one discovery for the module)."""
    registry = make_registry()
    registry.add_mcp_server("asking", stdio_config(SERVERS / "asking_server.py"))
    return registry


@pytest.fixture(scope="module")
def paused_store(asking_registry: ToolRegistry, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A storage folder with `run_ask` paused at the server's question; its executor (and with it the
    server's session) is closed before any test resumes the run."""
    folder = tmp_path_factory.mktemp("paused")
    executor, _ = make_executor(asking_registry)
    history = RunHistory(folder)
    try:
        state = run_workflow(
            _source(),
            registry=asking_registry,
            executor=executor,
            user_input="register me",
            run_id="run_ask",
            history=history,
        )
    finally:
        executor.close()
        history.close()
    (request,) = state["__interrupt__"]
    assert getattr(request, "value", request)["type"] == "mcp_elicitation"
    status = run_status("run_ask", storage=folder)
    assert status["status"] == "interrupted"
    assert status["state"]["__interrupt__"][0]["schema"]["required"] == ["name"]
    return folder


@pytest.fixture
def store(paused_store: Path, tmp_path: Path) -> Path:
    """This test's copy of the paused run's storage folder."""
    return Path(shutil.copytree(paused_store, tmp_path / "store"))


@pytest.fixture(scope="module")
def resumer(asking_registry: ToolRegistry) -> Iterator[tuple[ToolExecutor, MemoryEventLog]]:
    """A new executor (a new session with a new server process) that resumes the runs, and its log."""
    executor, log = make_executor(asking_registry)
    yield executor, log
    executor.close()


def _answers(log: MemoryEventLog) -> list[dict]:
    done = [e for e in log.events if e.type == "tool.completed" and e.tool_id == TOOL]
    return [json.loads(e.output["result"]) for e in done]


def test_an_answer_resumes_the_run_and_reaches_the_server(
    store: Path, asking_registry: ToolRegistry, resumer: tuple[ToolExecutor, MemoryEventLog]
) -> None:
    executor, log = resumer
    log.clear()
    final = resume_run(
        "run_ask",
        {"decision": "accept", "content": {"name": "Ada", "age": 36}},
        storage=store,
        registry=asking_registry,
        executor=executor,
    )
    assert _answers(log) == [{"action": "accept", "content": {"name": "Ada", "age": 36}}]
    assert "__interrupt__" not in final
    assert RunHistory(store).run("run_ask")["status"] == "completed"  # type: ignore[index]


def test_a_declined_question_resumes_the_run_with_the_decline(
    store: Path, asking_registry: ToolRegistry, resumer: tuple[ToolExecutor, MemoryEventLog]
) -> None:
    executor, log = resumer
    log.clear()
    resume_run("run_ask", "decline", storage=store, registry=asking_registry, executor=executor)
    assert [answer["action"] for answer in _answers(log)] == ["decline"]


@pytest.mark.parametrize(
    ("answer", "field", "named"),
    [
        ("approve", "decision", "'approve'"),  # a HITL decision does not answer a server's question
        ({"decision": "accept"}, "content", "None"),
        ({"decision": "accept", "content": ["Ada"]}, "content", "['Ada']"),
        (42, "decision", "42"),
    ],
)
def test_an_answer_that_cannot_fit_is_a_422_naming_the_field_and_the_run_stays_paused(
    store: Path, answer: object, field: str, named: str
) -> None:
    with pytest.raises(RunResumeError, match="run_ask|content") as caught:
        resume_run("run_ask", answer, storage=store, registry=make_registry())
    assert (caught.value.status, caught.value.field) == (422, field)
    assert named in str(caught.value)
    assert RunHistory(store).run("run_ask")["status"] == "interrupted"  # type: ignore[index]
