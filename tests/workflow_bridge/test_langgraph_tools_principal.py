"""A host's LangGraph graph run for a principal (a request's, a `/workflows/run`'s): its tool nodes and
LangChain tools read the principal's ceiling and budget, so a restricted key meets the same refusals as
`/tools/invoke`. Real graphs (agent -> tools -> agent) with a scripted chat model."""

from __future__ import annotations

import typing
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools.api.app import principal_context
from echo_tools.executor import ToolExecutor
from echo_tools.gate import Budget, Grants, Principal, acting_as
from echo_tools.models import ToolContext
from tests.echo_tools import _api_support as support

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from langchain_core.messages import HumanMessage, ToolMessage
    from langgraph.prebuilt import ToolNode

    from tests.workflow_bridge._fake_llms import ScriptedChatModel
    from tests.workflow_bridge.test_langgraph_tools import agent_graph, call
    from workflow_bridge.langgraph_tools import make_tool_node, to_langchain_tools
    from workflow_bridge.routes import under_principal

pytestmark = pytest.mark.filterwarnings("ignore:Cannot set an attribute on 'crewai:ImportWarning")

IDE = Principal("ide", Grants(permissions=["net:outbound"], actions=["invoke", "run"]))
THRIFTY = Principal("thrifty", Grants(actions=["invoke", "run"], budget=Budget(max_calls=1)))


@pytest.fixture
def registry(tmp_path: Path) -> typing.Any:
    return support.make_registry(None, support.ECHO, support.GUARDED)


@pytest.fixture
def executor(registry: typing.Any) -> Iterator[ToolExecutor]:
    running = ToolExecutor(registry)
    yield running
    running.close()


def _messages(graph: typing.Any) -> list[ToolMessage]:
    result = graph.invoke({"messages": [HumanMessage("go")]})
    return [m for m in result["messages"] if isinstance(m, ToolMessage)]


def _guarded_graph(registry: typing.Any, executor: ToolExecutor, stock: bool = False) -> typing.Any:
    model = ScriptedChatModel(steps=[[call("guarded", "c1", text="pwned")]])
    if stock:  # LangChain tools in LangGraph's own ToolNode (what `create_agent` runs)
        return agent_graph(model, ToolNode(to_langchain_tools(["tool_guarded"], registry, executor)))
    return agent_graph(model, make_tool_node(registry, executor, ["tool_guarded"]))


@pytest.mark.parametrize("stock", [False, True], ids=["executor_tool_node", "stock_tool_node"])
def test_a_restricted_principal_s_graph_meets_the_invoke_route_s_refusal(
    registry: typing.Any, executor: ToolExecutor, stock: bool
) -> None:
    with acting_as(IDE):
        (message,) = _messages(_guarded_graph(registry, executor, stock))
    route = executor.invoke_sync("tool_guarded", {"text": "pwned"}, ToolContext(**principal_context(IDE)))
    assert message.status == "error" and "fs:write" in str(message.content)
    assert not route.success and route.error_type == "permission_denied"
    assert route.error is not None and route.error in str(message.content)
    if not stock:
        assert message.artifact.error_type == "permission_denied"


@pytest.mark.parametrize("stock", [False, True], ids=["executor_tool_node", "stock_tool_node"])
def test_the_operator_s_graph_calls_the_same_tool(
    registry: typing.Any, executor: ToolExecutor, stock: bool
) -> None:
    (message,) = _messages(_guarded_graph(registry, executor, stock))
    assert message.status == "success" and "pwned" in str(message.content)


def test_a_graph_under_a_principal_counts_every_call_on_its_budget(
    registry: typing.Any, executor: ToolExecutor
) -> None:
    model = ScriptedChatModel(steps=[[call("echo", "c1", text="one")], [call("echo", "c2", text="two")]])
    with acting_as(THRIFTY):
        first, second = _messages(agent_graph(model, make_tool_node(registry, executor, ["tool_echo"])))
    assert first.status == "success"
    assert second.status == "error" and second.artifact.error_type == "budget"
    assert "max_calls=1" in str(second.content)


def test_a_workflow_run_s_principal_reaches_a_host_graph_s_tool_nodes(
    registry: typing.Any, executor: ToolExecutor
) -> None:
    with under_principal("run-host", IDE):
        (message,) = _messages(_guarded_graph(registry, executor))
    assert message.status == "error" and message.artifact.error_type == "permission_denied"
    assert "fs:write" in str(message.content)


def test_a_node_s_own_narrower_grant_stays_within_the_principal_s_ceiling(
    registry: typing.Any, executor: ToolExecutor
) -> None:
    wide = Principal("wide", Grants(permissions=["net:outbound", "fs:write"]))
    narrow = ToolContext(granted_permissions=["net:outbound"])
    model = ScriptedChatModel(steps=[[call("guarded", "c1", text="x")]])
    with acting_as(wide):
        (message,) = _messages(
            agent_graph(model, make_tool_node(registry, executor, ["tool_guarded"], narrow))
        )
    assert message.status == "error" and message.artifact.error_type == "permission_denied"
