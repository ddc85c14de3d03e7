"""The local language model in the loop (`make install-llm`): agents choose tools, correct themselves after
feedback, and a plain answer stays an answer. Asserts on outcomes (tool side effects, the final number),
never on wording. Skipped, naming `make install-llm`, where the weights are absent."""

from __future__ import annotations

import os
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import tests.workflow_bridge._compiler_support  # noqa: F401  (imports crewai quietly first)
from echo_tools import ToolExecutor, ToolRegistry, tool
from tests.workflow_bridge import _real_model_tools as tools
from tests.workflow_bridge._mapper_support import chain, node
from workflow_bridge.local_llm import LocalModelServer, local_chat_model, missing_reason

MISSING = missing_reason()
pytestmark = [
    pytest.mark.real_model,
    pytest.mark.slow,
    pytest.mark.skipif(MISSING is not None, reason=f"real model: {MISSING}"),
]

MODULE = "tests.workflow_bridge._real_model_tools"
LIMIT = {"recursion_limit": 12}  # model and tool steps: a model that keeps calling fails, it does not hang


@pytest.fixture(scope="module")
def server():
    # beside another pytest-xdist worker (make test), one thread: two would wait on each other at every
    # step whenever the other worker holds a core (the same answers, each row is one thread's work)
    threads = 1 if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1 else None
    with LocalModelServer(threads=threads) as running:
        yield running


@pytest.fixture
def registry() -> ToolRegistry:
    tools.CALLS.clear()
    registry = ToolRegistry(allowed_modules=[MODULE])
    for function in (tools.multiply, tools.add, tools.save_note):
        registry.register(tool(function).tool_def)
    return registry


def numbers_in(text: Any) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"-?\d[\d,]*(?:\.\d+)?", str(text))}


def agent_for(server: LocalModelServer, registry: ToolRegistry, names: list[str]) -> Any:
    from langchain.agents import create_agent

    from workflow_bridge import make_tool_node

    node_ = make_tool_node(registry, ToolExecutor(registry), names)
    return create_agent(local_chat_model(server), tools=node_), node_


def test_a_langgraph_agent_chooses_the_tool_and_answers_with_its_result(server, registry):
    agent, _ = agent_for(server, registry, ["multiply", "add", "save_note"])
    state = agent.invoke({"messages": [HumanMessage("What is 17 times 23? Use a tool.")]}, LIMIT)
    assert ("multiply", {"a": 17, "b": 23}) in tools.CALLS or ("multiply", {"a": 23, "b": 17}) in tools.CALLS
    assert 391 in numbers_in(state["messages"][-1].content)


def test_a_misspelled_tool_name_is_corrected_by_the_model_after_the_feedback(server, registry):
    agent, node_ = agent_for(server, registry, ["multiply", "add"])
    question = HumanMessage("What is 17 times 23? Use a tool.")
    wrong = AIMessage("", tool_calls=[{"name": "multipy", "args": {"a": 17, "b": 23}, "id": "call_1"}])
    feedback = node_.invoke({"messages": [question, wrong]})["messages"]
    assert "Did you mean 'multiply'?" in feedback[0].content and tools.CALLS == []
    state = agent.invoke({"messages": [question, wrong, *feedback]}, LIMIT)
    assert [name for name, _ in tools.CALLS] == ["multiply"]
    assert 391 in numbers_in(state["messages"][-1].content)


def test_a_wrong_argument_type_is_corrected_by_the_model_after_the_feedback(server, registry):
    agent, node_ = agent_for(server, registry, ["multiply", "add"])
    question = HumanMessage("What is 17 times 23? Use a tool.")
    wrong = AIMessage(
        "", tool_calls=[{"name": "multiply", "args": {"a": "seventeen", "b": 23}, "id": "call_1"}]
    )
    feedback = node_.invoke({"messages": [question, wrong]})["messages"]
    assert feedback[0].status == "error" and "validation" in feedback[0].content and tools.CALLS == []
    state = agent.invoke({"messages": [question, wrong, *feedback]}, LIMIT)
    assert sorted(tools.CALLS[-1][1].values()) == [17, 23]
    assert 391 in numbers_in(state["messages"][-1].content)


def test_a_plain_answer_containing_a_brace_is_not_a_tool_call(server, registry):
    agent, _ = agent_for(server, registry, ["multiply", "save_note"])
    request = "Write a Python dict literal that maps 'a' to 1 and 'b' to 2. Reply with the code only."
    state = agent.invoke({"messages": [HumanMessage(request)]}, LIMIT)
    final = state["messages"][-1]
    assert tools.CALLS == [] and isinstance(final, AIMessage) and not final.tool_calls
    assert "{" in str(final.content)


def _two_agents_and_a_review() -> dict[str, Any]:
    tool_entry = {"tool_id": "tool_multiply", "name": "multiply", "enabled": True}
    note_entry = {"tool_id": "tool_save_note", "name": "save_note", "enabled": True}
    return chain(
        node(1, "Start", "Start"),
        node(
            2, "Agent", "Calculator", prompt="Multiply 17 by 23 with the multiply tool.", tools=[tool_entry]
        ),
        node(3, "HITL", "Review", reviewTitle="Check the product", allowedDecisions=["approve", "reject"]),
        node(
            4,
            "Agent",
            "Note Taker",
            prompt="Save a note stating the product from the previous agent's output with the save_note tool.",
            tools=[note_entry],
        ),
        node(5, "End", "End", outputVariables=[{"name": "result", "type": "string"}]),
        workflow_id="wf_real_model",
    )


def test_a_canvas_workflow_of_two_crewai_agents_pauses_for_review_and_resumes(server, registry, tmp_path):
    from echo_tools.history import RunHistory
    from workflow_bridge.llm import local_crew_llm
    from workflow_bridge.runner import resume_run, run_workflow

    executor = ToolExecutor(registry)
    llm = local_crew_llm(server)
    history = RunHistory(tmp_path)
    state = run_workflow(
        _two_agents_and_a_review(),
        registry=registry,
        executor=executor,
        user_input="Compute 17 times 23 and keep a note of it.",
        llm=llm,
        run_id="run_real_model",
        history=history,
    )
    assert "__interrupt__" in state
    assert [name for name, _ in tools.CALLS] == ["multiply"] and sorted(tools.CALLS[0][1].values()) == [
        17,
        23,
    ]
    assert 391 in numbers_in(state["crew_result"])
    final = resume_run(
        "run_real_model", "approve", storage=history, registry=registry, executor=executor, llm=llm
    )
    assert "__interrupt__" not in final
    notes = [args["text"] for name, args in tools.CALLS if name == "save_note"]
    assert notes and any(391 in numbers_in(text) for text in notes)


def test_a_process_serving_the_model_still_stops_on_sigterm():
    import signal
    import subprocess
    import sys

    code = (
        "from workflow_bridge.local_llm import LocalModelServer\n"
        "server = LocalModelServer().start()\n"
        "print('ready', flush=True)\n"
        "import threading; threading.Event().wait(600)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        child.send_signal(signal.SIGTERM)
        assert child.wait(timeout=120) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
