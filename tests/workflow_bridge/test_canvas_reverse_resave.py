"""A canvas reopened through EchoAI's reverse mapper can be saved again (issue 17.6): it turned the
`builtin_code` id into `{"name": "Builtin Code", "type": "tools", "config": {}}`, which was refused."""

from __future__ import annotations

import pytest

from tests.workflow_bridge._compiler_support import agent_tools_registry
from tests.workflow_bridge._mapper_support import chain, node
from workflow_bridge.node_mapper import NodeMapper


@pytest.fixture(scope="module")
def mapper() -> NodeMapper:
    return NodeMapper(agent_tools_registry())


def test_a_round_tripped_builtin_code_entry_maps_to_the_builtin(mapper):
    entry = {"id": 7, "name": "Builtin Code", "type": "tools", "enabled": True, "config": {}}
    payload = chain(node(1, "Start"), node(2, "Agent", "Coder", prompt="x", tools=[entry]), node(3, "End"))
    mapped = mapper.map_canvas(payload)
    assert mapped.ok, mapped.diagnostics
    (coder,) = [a for a in mapped.agents.values() if a["name"] == "Coder"]
    assert coder["tools"] == ["builtin_code"]
    assert coder["tool_bindings"][0]["type"] == "code"


def test_a_round_tripped_mcp_server_entry_without_its_server_is_still_an_error_naming_it(mapper):
    entry = {"id": 8, "name": "Builtin Mcp Server", "type": "tools", "enabled": True, "config": {}}
    payload = chain(node(1, "Start"), node(2, "Agent", "Caller", prompt="x", tools=[entry]), node(3, "End"))
    mapped = mapper.map_canvas(payload)
    assert not mapped.ok
    assert any("serverId" in d.message for d in mapped.errors)


def test_an_unknown_template_tool_is_still_an_error(mapper):
    entry = {"id": 9, "name": "Slack", "type": "tools", "enabled": True, "config": {}}
    payload = chain(node(1, "Start"), node(2, "Agent", "Poster", prompt="x", tools=[entry]), node(3, "End"))
    mapped = mapper.map_canvas(payload)
    assert not mapped.ok and any("'Slack'" in d.message for d in mapped.errors)


def test_a_misspelled_tool_is_an_error_naming_the_node_by_its_name_with_a_did_you_mean(mapper):
    payload = chain(
        node(1, "Start"),
        node(2, "Agent", "Number cruncher", prompt="x", tools=["Calculater"]),
        node(3, "End"),
    )
    mapped = mapper.map_canvas(payload)
    (error,) = mapped.errors
    assert error.message.startswith("Node 'Number cruncher' (id '")
    assert "tool 'Calculater' is not in the tool registry. Did you mean 'Calculator'?" in error.message
