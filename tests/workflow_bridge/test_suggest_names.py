"""People read canvas names and get "did you mean" in workflow errors: agents naming unknown tools, bad
Conditional nodes."""

from __future__ import annotations

import pytest

from echo_tools.errors import ToolNotFoundError
from tests.workflow_bridge._compiler_support import agent, make_executor, make_registry, workflow
from workflow_bridge.agent_factory import AgentFactory
from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler


def test_an_agent_naming_a_mistyped_tool_gets_the_tool_meant():
    registry = make_registry()
    executor, _ = make_executor(registry)
    try:
        factory = AgentFactory(registry, executor)
        with pytest.raises(ToolNotFoundError) as caught:
            factory.resolve_tools(agent("agt_5f3a", name="Researcher", tools=["Scor"]))
    finally:
        executor.close()
    message = str(caught.value)
    assert "Agent 'Researcher' (agt_5f3a) names tool 'Scor'" in message
    assert message.endswith("Did you mean 'Score'?")


def test_a_conditional_with_a_bad_condition_is_named_by_its_canvas_name():
    branches = [{"type": "if", "condition": "score >>> 3", "targetNodeId": "b"}]
    wf, agents = workflow(
        [
            agent("agt_91c2", "Conditional", name="Risk gate", metadata={"branches": branches}),
            agent("b", name="High risk"),
        ],
        [("agt_91c2", "b")],
        model="hybrid",
    )
    registry = make_registry()
    executor, _ = make_executor(registry)
    try:
        with pytest.raises(WorkflowCompileError) as caught:
            WorkflowCompiler(registry, executor).compile(wf, agents)
    finally:
        executor.close()
    assert str(caught.value).startswith("Conditional node 'Risk gate' (agt_91c2): ")
    assert caught.value.node_id == "agt_91c2"
