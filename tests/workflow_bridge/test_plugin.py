"""ToolBindingPlugin: the calls an existing EchoAI compiler makes, each giving tools that run for real."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from tests.workflow_bridge._compiler_support import agent, make_executor, make_registry
from workflow_bridge.plugin import ToolBindingPlugin


@pytest.fixture
def plugin():
    registry = make_registry()
    executor, log = make_executor(registry)
    plugin = ToolBindingPlugin(registry, executor)
    plugin.log = log  # type: ignore[attr-defined]
    return plugin


AGENT = agent(
    "agt_p", tools=["tool_echo", "Score"], tool_bindings=[{"tool_id": "tool_echo", "fixed": {"prefix": "F"}}]
)


def test_crewai_tools_for_an_agent_run_through_the_executor_with_its_id(plugin):
    tools = {t.name: t for t in plugin.crewai_tools_for(AGENT)}
    assert set(tools) == {"echo", "score"}
    assert tools["echo"].run(text="x") == '{"echo": "F: x"}'
    assert plugin.log.of_type("tool.completed")[-1].agent_id == "agt_p"


def test_langchain_tools_for_an_agent_keep_the_binding(plugin):
    tools = {
        t.name: t for t in plugin.langchain_tools_for(AGENT, plugin.context_for(AGENT, {"run_id": "run_lc"}))
    }
    assert set(tools) == {"echo", "score"}
    assert "F: y" in str(tools["echo"].invoke({"text": "y"}))
    assert plugin.log.of_type("tool.completed")[-1].run_id == "run_lc"


def test_tool_node_for_an_agent_answers_the_models_tool_calls(plugin):
    node = plugin.tool_node_for(AGENT)
    call = {"name": "score", "args": {"subject": "abc"}, "id": "call_1", "type": "tool_call"}
    out = node.invoke({"messages": [AIMessage(content="", tool_calls=[call])]})
    (message,) = out["messages"]
    assert isinstance(message, ToolMessage) and message.tool_call_id == "call_1"
    assert '"risk_score": 9' in message.content


def test_resolve_canvas_tools_reads_every_entry_shape_and_reports_unknown_ones(plugin):
    entries = [
        {"id": 1, "tool_id": "tool_echo", "name": "Echo", "type": "local", "enabled": True},
        "Score",
        {"id": "tool_meet_a", "name": "Tool Meet A", "type": "tools", "enabled": True, "config": {}},
        {"id": 4, "name": "Broken", "type": "local", "enabled": False},
        {"id": 5, "name": "Slack", "type": "tools", "enabled": True, "config": {"provider": "slack"}},
    ]
    ids, diagnostics = plugin.resolve_canvas_tools(entries, node_id="n1")
    assert ids == ["tool_echo", "tool_score", "tool_meet_a"]
    errors = [d for d in diagnostics if d.level == "error"]
    assert len(errors) == 1 and "Slack" in errors[0].message and errors[0].node_id == "n1"


def test_tool_node_for_honours_a_binding_given_in_the_dict_form_without_a_tool_id(plugin):
    config = agent("agt_d", tools=["tool_echo"], tool_bindings={"tool_echo": {"fixed": {"prefix": "D"}}})
    node = plugin.tool_node_for(config)
    call = {"name": "echo", "args": {"text": "z"}, "id": "call_d", "type": "tool_call"}
    (message,) = node.invoke({"messages": [AIMessage(content="", tool_calls=[call])]})["messages"]
    assert message.status == "success"
    assert "D: z" in message.content
