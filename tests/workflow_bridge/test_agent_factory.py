"""AgentFactory: which tools an agent gets (wildcards, exclusions, bindings, status) and the CrewAI agent."""

from __future__ import annotations

import pytest

from echo_tools.errors import ToolNotFoundError
from echo_tools.models import ToolContext
from tests.workflow_bridge._compiler_support import agent, make_executor, make_registry
from workflow_bridge.agent_factory import AgentFactory
from workflow_bridge.llm import is_rehearsal


@pytest.fixture
def factory():
    registry = make_registry()
    executor, log = make_executor(registry)
    factory = AgentFactory(registry, executor)
    factory.log = log  # type: ignore[attr-defined]
    return factory


def names(tools):
    return sorted(t.name for t in tools)


def test_a_wildcard_binds_every_active_tool_except_the_excluded_ones(factory):
    tools = factory.bind_tools(agent("a", tools=["*"], tools_exclude=["Broken", "tool_meet_a"]))
    assert names(tools) == ["echo", "http_request", "meet_b", "score"]  # "Retired" is disabled


def test_tools_resolve_by_id_name_or_slug_and_duplicates_bind_once(factory):
    tools = factory.bind_tools(agent("a", tools=["tool_echo", "Echo", "score", "SCORE"]))
    assert names(tools) == ["echo", "score"]


def test_bindings_switch_tools_off_fix_parameters_and_override_descriptions(factory):
    bindings = [
        {"tool_id": "tool_score", "enabled": False},
        {
            "tool_id": "tool_echo",
            "enabled": True,
            "fixed": {"prefix": "P"},
            "description": "Repeat the text.",
        },
    ]
    (echo,) = factory.bind_tools(agent("a", tools=["tool_echo", "tool_score"], tool_bindings=bindings))
    assert echo.description.startswith("Repeat the text.")
    assert "prefix" not in echo.args_schema.model_json_schema()["properties"]
    assert echo.run(text="hi") == '{"echo": "P: hi"}'


def test_disabled_tools_are_left_out(factory):
    assert factory.bind_tools(agent("a", tools=["Retired", "Echo"])) and names(
        factory.bind_tools(agent("a", tools=["Retired", "Echo"]))
    ) == ["echo"]


def test_an_unknown_tool_is_an_error_naming_the_agent_and_the_tool(factory):
    with pytest.raises(ToolNotFoundError) as info:
        factory.bind_tools(agent("agt_1", name="Researcher", tools=["Echo", "Web Fetch"]))
    message = str(info.value)
    assert "'Web Fetch'" in message and "'Researcher'" in message and "agt_1" in message


def test_builtin_placeholders_without_a_tool_are_not_bound(factory):
    assert names(factory.bind_tools(agent("a", tools=["builtin_mcp_server", "Echo"]))) == ["echo"]


def test_bound_tools_call_the_executor_with_the_agents_context(factory):
    ctx = ToolContext(agent_id="agt_7", workflow_id="wf_7", run_id="run_7", node_id="node_7")
    (echo,) = factory.bind_tools(agent("agt_7", tools=["Echo"]), ctx)
    echo.run(text="ctx")
    event = factory.log.of_type("tool.completed")[-1]
    assert (event.agent_id, event.workflow_id, event.run_id, event.node_id) == (
        "agt_7",
        "wf_7",
        "run_7",
        "node_7",
    )


def test_create_agent_builds_a_crewai_agent_with_tools_and_the_agents_model(factory):
    definition = agent(
        "a", name="Analyst", tools=["Echo"], role="Analyst", goal="Find facts", constraints={"max_steps": 3}
    )
    crew_agent = factory.create_agent(definition)
    assert (crew_agent.role, crew_agent.goal, crew_agent.max_iter) == ("Analyst", "Find facts", 3)
    assert names(crew_agent.tools) == ["echo"] and crew_agent.allow_delegation is False
    assert is_rehearsal(crew_agent.llm)
