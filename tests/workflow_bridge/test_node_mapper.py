"""NodeMapper: EchoAI canvases -> workflow JSON and agents, tool entries resolved, and back to the canvas."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from echo_tools.models import ToolDef
from echo_tools.registry import ToolRegistry
from tests.conftest import FIXTURE_CORPUS, Corpus, corpus_cases
from tests.workflow_bridge._mapper_support import (
    canvas,
    chain,
    corpus_registry,
    node,
    save_payload,
    without_timestamps,
)
from workflow_bridge.node_mapper import NodeMapper, agent_id_for, normalize_agent

_FUZZ_REGISTRY = corpus_registry(FIXTURE_CORPUS)


@pytest.fixture
def registry(corpus: Corpus) -> ToolRegistry:
    return corpus_registry(corpus)


@pytest.fixture
def mapper(registry: ToolRegistry) -> NodeMapper:
    return NodeMapper(registry)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _by_name(mapped) -> dict:
    return {a["name"]: a for a in mapped.agents.values()}


def _canvas(corpus: Corpus, stem: str) -> dict:
    return _load(corpus / "canvases" / f"{stem}.json")


def _echoai_workflow_named(corpus: Corpus, name: str) -> dict:
    for path in (corpus / "workflows" / "draft").glob("*.json"):
        data = _load(path)
        if data["name"].split()[0] == name.split()[0]:
            return data
    raise AssertionError(f"no corpus workflow like {name!r}")


# -- the corpus ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("corpus", "stem"), corpus_cases(lambda c: c.canvases), indirect=["corpus"])
def test_every_corpus_canvas_maps_like_echoai_did(corpus: Corpus, mapper: NodeMapper, stem: str) -> None:
    data = _canvas(corpus, stem)
    mapped = mapper.map_canvas(data)
    assert mapped.diagnostics == []
    assert len(mapped.agents) == len(data["nodes"])
    assert len(mapped.workflow["connections"]) == len(data["connections"])
    echoai = _echoai_workflow_named(corpus, data["title"])
    assert mapped.workflow["execution_model"] == echoai["execution_model"]
    assert list(mapped.workflow["state_schema"]) == list(echoai["state_schema"])  # EchoAI's M&A types differ
    assert len(mapped.workflow["human_in_loop"]["review_points"]) == len(
        echoai["human_in_loop"]["review_points"]
    )


def test_corpus_canvas_agents_keep_echoais_node_metadata(corpus: Corpus, mapper: NodeMapper) -> None:
    mapped = _by_name(mapper.map_canvas(_canvas(corpus, corpus.node_types_canvas)))
    compared = set()
    for path in (corpus / "agents").glob("agt_*.json"):
        theirs = _load(path)
        ours = mapped.get(theirs["name"])
        if ours is None or theirs["metadata"].get("node_type") != ours["metadata"]["node_type"]:
            continue
        compared.add(ours["metadata"]["node_type"])
        assert (ours["role"], ours["description"]) == (theirs["role"], theirs["description"])
        assert ours["metadata"]["ui_layout"] == theirs["metadata"]["ui_layout"]
        if "code_config" in theirs["metadata"]:
            assert ours["metadata"]["code_config"] == theirs["metadata"]["code_config"]
        if "review_config" in theirs["metadata"]:  # EchoAI dropped minConfidence (0.9) for its default 0.8
            assert set(ours["metadata"]["review_config"]) >= set(theirs["metadata"]["review_config"])
            assert ours["metadata"]["review_config"]["confidenceThreshold"] == 0.9
        if "api_config" in theirs["metadata"]:
            api = ours["metadata"]["api_config"]
            assert (api["method"], api["url"]) == (
                theirs["metadata"]["api_config"]["method"],
                theirs["metadata"]["api_config"]["url"],
            )
        if "branches" in theirs["metadata"]:
            pairs = [(b["condition"], b["canvasTargetNodeId"]) for b in ours["metadata"]["branches"]]
            assert pairs == [(b["condition"], b["targetNodeId"]) for b in theirs["metadata"]["branches"]]
    assert compared == {"Agent", "Conditional", "API", "Code", "Self-Review", "HITL"}


def test_conditional_branch_targets_are_agent_ids(corpus: Corpus, mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(_canvas(corpus, corpus.gate_canvas))
    gate = _by_name(mapped)[corpus.gate_name]
    branches = gate["metadata"]["branches"]
    assert [b["type"] for b in branches] == ["if", "elif", "else"]
    assert [b["targetNodeId"] for b in branches] == [
        mapped.node_ids[str(b["canvasTargetNodeId"])] for b in branches
    ]
    assert all(b["targetNodeId"] in mapped.agents for b in branches)


def test_hitl_and_api_nodes_read_the_keys_the_canvas_writes(corpus: Corpus, mapper: NodeMapper) -> None:
    agents = _by_name(mapper.map_canvas(_canvas(corpus, corpus.gate_canvas)))
    hitl = agents[corpus.hitl_name]["metadata"]["hitl_config"]
    assert hitl["title"] == corpus.hitl_title
    assert hitl["allowedDecisions"] == list(corpus.hitl_decisions)
    api = agents[corpus.api_name]["metadata"]["api_config"]
    assert api["auth"] == {"type": "bearer"}
    assert api["headers"] == {"Content-Type": "application/json"}


def test_mapped_agents_and_workflows_validate_against_echoais_schemas(
    corpus: Corpus, mapper: NodeMapper
) -> None:
    agent_schema = _load(corpus / "schemas" / "agent_schema.json")
    workflow_schema = _load(corpus / "schemas" / "workflow_schema.json")
    payloads = [_canvas(corpus, stem) for stem in corpus.canvases] + [save_payload()]
    for payload in payloads:
        mapped = mapper.map_canvas(payload)
        jsonschema.Draft7Validator(workflow_schema).validate(mapped.workflow)
        for agent in mapped.agents.values():
            jsonschema.Draft7Validator(agent_schema).validate(agent)


def test_every_corpus_agent_normalises_to_a_complete_agent(corpus: Corpus) -> None:
    schema = _load(corpus / "schemas" / "agent_schema.json")
    for path in sorted((corpus / "agents").glob("agt_*.json")):
        original = _load(path)
        agent = normalize_agent(original)
        jsonschema.Draft7Validator(schema).validate(agent)
        for key in ("tools", "input_schema", "output_schema", "tool_bindings"):
            assert isinstance(agent[key], list), (path.name, key)
        assert isinstance(agent["llm"], dict) and isinstance(agent["metadata"], dict)
        assert agent["tools"] == original["tools"]
        assert _load(path) == original  # the input is not modified
    legacy = normalize_agent(_load(corpus / "agents" / f"{corpus.legacy_agent}.json"))
    assert legacy["metadata"]["node_type"] == "Agent" and legacy["prompt"] == ""
    assert normalize_agent({"agent_id": "agt_x", "tools": None})["tools"] == []


def test_normalize_agent_refuses_a_non_object() -> None:
    with pytest.raises(TypeError, match="list"):
        normalize_agent([])  # type: ignore[arg-type]


# -- the save payload and tool entries ------------------------------------------------------------------


def test_the_save_payload_maps_to_three_agents_with_web_search_bound(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(save_payload())
    assert mapped.ok, mapped.diagnostics
    assert mapped.workflow["workflow_id"].startswith("wf_")
    assert mapped.workflow["execution_model"] == "sequential"
    assert mapped.workflow["state_schema"] == {"query": "string", "result": "string"}
    start, agent, end = (mapped.agents[a] for a in mapped.workflow["agents"])
    assert start["input_schema"] == ["query"] and end["output_schema"] == ["result"]
    assert agent["tools"] == ["tool_web_search", "builtin_code"]
    assert agent["llm"] == {
        "provider": "anthropic",
        "model": "claude-sonnet-4-5-20250514",
        "temperature": 0.7,
        "max_tokens": 4000,
        "top_p": 0.9,
    }
    web, code = agent["tool_bindings"]
    assert web["tool_id"] == "tool_web_search" and web["fixed"] == {} and web["config"] == {}
    assert "description" not in web  # the IDE's copy of the tool's description is not an override
    assert code == {
        "tool_id": "builtin_code",
        "name": "Code Execution",
        "type": "code",
        "enabled": True,
        "fixed": {},
        "config": {"language": "python", "code": ""},
        "entry_id": 1769588795000,
    }
    assert agent["metadata"]["canvas_extra"]["memory"] == {"enabled": True, "type": "short-term"}


def test_all_five_tool_entry_shapes_resolve(mapper: NodeMapper, registry: ToolRegistry) -> None:
    registry.register(  # an MCP Server entry binds its server's registered tool (see test_canvas_mcp_*)
        ToolDef(name="Read File", tool_id="mcp.files.read_file", tool_type="mcp",
                execution_config={"server": "files", "tool": "read_file"})
    )  # fmt: skip
    entries = [
        {
            "id": 1,
            "tool_id": "tool_calculator",
            "name": "Calculator",
            "type": "local",
            "enabled": True,
            "config": {"type": "object", "properties": {}},
        },
        {
            "id": 2,
            "name": "MCP",
            "type": "mcp_server",
            "enabled": True,
            "config": {"serverId": "files", "operationName": "read_file"},
        },
        {
            "id": 3,
            "name": "Code Reviewer",
            "type": "tools",
            "enabled": True,
            "config": {"provider": "internal", "action": "review", "credentials": {}, "description": "x"},
        },
        "Web Search",
        {"id": "tool_1f2e3d", "name": "Tool File Reader", "type": "tools", "enabled": True, "config": {}},
    ]
    mapped = mapper.map_canvas(chain(node(1, "Agent", tools=entries)))
    assert mapped.ok, mapped.diagnostics
    agent = next(iter(mapped.agents.values()))
    assert agent["tools"] == [
        "tool_calculator",
        "mcp.files.read_file",
        "tool_code_reviewer",
        "tool_web_search",
        "tool_file_reader",
    ]
    bindings = {b["tool_id"]: b for b in agent["tool_bindings"]}
    assert bindings["mcp.files.read_file"]["config"] == {"serverId": "files", "operationName": "read_file"}
    assert bindings["tool_code_reviewer"]["config"]["action"] == "review"
    assert bindings["tool_calculator"]["config"] == {}  # the copied input schema is not a setting


def test_an_mcp_server_entry_binds_the_registered_mcp_tool(
    mapper: NodeMapper, registry: ToolRegistry
) -> None:
    registry.register(
        ToolDef(
            name="Read File",
            tool_id="mcp.files.read_file",
            tool_type="mcp",
            execution_config={"server": "files", "tool": "read_file"},
        )
    )
    entry = {
        "name": "Files",
        "type": "mcp_server",
        "config": {"serverId": "files", "operationName": "read_file"},
    }
    mcp_node = node(2, "MCP", serverId="files", operation="read_file")
    mapped = mapper.map_canvas(chain(node(1, "Agent", tools=[entry]), mcp_node))
    assert mapped.ok, mapped.diagnostics
    agent, mcp = (mapped.agents[a] for a in mapped.workflow["agents"])
    assert agent["tools"] == ["mcp.files.read_file"]
    assert agent["tool_bindings"][0]["config"] == {"serverId": "files", "operationName": "read_file"}
    assert mcp["metadata"]["mcp_config"]["serverId"] == "files"
    assert mcp["metadata"]["mcp_config"]["operation"] == "read_file"
    assert mcp["metadata"]["mcp_config"]["tool_id"] == "mcp.files.read_file"


def test_an_mcp_node_without_server_is_an_error(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(chain(node(1, "MCP", serverName="", operation="")))
    assert [(d.level, d.node_id, d.field) for d in mapped.diagnostics] == [("error", "1", "config.serverId")]


def test_a_disabled_entry_is_kept_but_not_bound(mapper: NodeMapper) -> None:
    entries = [{"tool_id": "tool_web_search", "enabled": False}, "Calculator"]
    mapped = mapper.map_canvas(chain(node(1, "Agent", tools=entries)))
    agent = next(iter(mapped.agents.values()))
    assert mapped.ok
    assert agent["tools"] == ["tool_calculator"]
    assert [(b["tool_id"], b["enabled"]) for b in agent["tool_bindings"]] == [
        ("tool_web_search", False),
        ("tool_calculator", True),
    ]


def test_a_string_false_also_disables_an_entry(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(chain(node(1, "Agent", tools=[{"name": "Calculator", "enabled": "false"}])))
    agent = next(iter(mapped.agents.values()))
    assert agent["tools"] == [] and agent["tool_bindings"][0]["enabled"] is False


def test_a_tool_disabled_in_the_registry_is_not_bound(mapper: NodeMapper, registry: ToolRegistry) -> None:
    registry.register({**registry.get("tool_calculator").to_storage_dict(), "status": "disabled"})
    mapped = mapper.map_canvas(chain(node(7, "Agent", tools=["Calculator"])))
    agent = next(iter(mapped.agents.values()))
    assert agent["tools"] == []
    assert [(d.level, d.node_id, d.field) for d in mapped.diagnostics] == [
        ("warning", "7", "config.tools[0]")
    ]


def test_an_unknown_tool_is_an_error_naming_the_node_and_the_tool(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(chain(node(5001, "Agent", tools=["Web Search", "Web Fetch"])))
    agent = next(iter(mapped.agents.values()))
    assert not mapped.ok
    (error,) = mapped.errors
    assert (error.node_id, error.field) == ("5001", "config.tools[1]")
    assert "'5001'" in error.message and "'Web Fetch'" in error.message
    assert agent["tools"] == ["tool_web_search"]  # no placeholder id such as "web_fetch"


def test_an_unknown_tool_id_falls_back_to_the_name_with_a_warning(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(
        chain(node(1, "Agent", tools=[{"tool_id": "tool_old_search", "name": "Web Search"}]))
    )
    assert next(iter(mapped.agents.values()))["tools"] == ["tool_web_search"]
    assert [(d.level, d.field) for d in mapped.diagnostics] == [("warning", "config.tools[0].tool_id")]


def test_fixed_parameters_come_from_fixed_and_from_parameter_values(mapper: NodeMapper) -> None:
    entries = [
        {"tool_id": "tool_web_search", "fixed": {"max_results": 3}, "config": {"fixed": {"language": "de"}}},
        {"tool_id": "tool_calculator", "config": {"precision": 4}},
    ]
    mapped = mapper.map_canvas(chain(node(1, "Agent", tools=entries)))
    assert mapped.ok, mapped.diagnostics
    web, calc = next(iter(mapped.agents.values()))["tool_bindings"]
    assert web["fixed"] == {"max_results": 3, "language": "de"}
    assert calc["fixed"] == {"precision": 4} and calc["config"] == {}


def test_an_invalid_fixed_value_is_an_error_naming_the_field_and_value(mapper: NodeMapper) -> None:
    entries = [{"tool_id": "tool_web_search", "fixed": {"max_results": 500, "colour": "red"}}]
    mapped = mapper.map_canvas(chain(node(3, "Agent", tools=entries)))
    levels = {d.field: d for d in mapped.diagnostics}
    assert levels["config.tools[0].fixed.max_results"].level == "error"
    assert "500" in levels["config.tools[0].fixed.max_results"].message
    assert levels["config.tools[0].fixed.colour"].level == "warning"


def test_a_wildcard_keeps_star_and_resolves_exclusions(mapper: NodeMapper) -> None:
    config = {
        "tools": ["*", {"tool_id": "tool_file_reader", "enabled": False}],
        "tools_exclude": ["Calculator"],
    }
    mapped = mapper.map_canvas(chain(node(1, "Agent", **config)))
    agent = next(iter(mapped.agents.values()))
    assert agent["tools"] == ["*"]
    assert agent["tools_exclude"] == ["tool_calculator", "tool_file_reader"]


def test_tools_on_a_non_agent_node_are_a_warning(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(chain(node(1, "Start", tools=["Web Search"])))
    assert [(d.level, d.field) for d in mapped.diagnostics] == [("warning", "config.tools")]


# -- ids, connections, graph shape -------------------------------------------------------------------


def test_agent_ids_are_stable_across_saves(mapper: NodeMapper) -> None:
    payload = save_payload()
    payload["workflow_id"] = "wf_fixed"
    first, second = mapper.map_canvas(payload), mapper.map_canvas(payload)
    assert first.workflow["agents"] == second.workflow["agents"]
    assert first.workflow["agents"][0] == agent_id_for("wf_fixed", 1769588771000)
    assert without_timestamps(first.agents) == without_timestamps(second.agents)
    other = mapper.map_canvas({**payload, "workflow_id": "wf_other"})
    assert set(other.agents).isdisjoint(first.agents)


def test_a_payload_without_workflow_id_gets_a_fresh_one_and_agent_ids_from_its_content(
    mapper: NodeMapper,
) -> None:
    a, b = mapper.map_canvas(save_payload()), mapper.map_canvas(save_payload())
    assert re.fullmatch(r"wf_canvas_[0-9a-f]{32}_[0-9a-f]{8}", a.workflow_id), a.workflow_id
    assert a.workflow_id != b.workflow_id
    # the same canvas, the same agent ids (so the same graph node names: a paused run resumes anywhere)
    assert a.workflow["agents"] == b.workflow["agents"]
    changed = save_payload()
    changed["canvas_nodes"][0]["name"] = "Renamed"
    assert set(mapper.map_canvas(changed).agents).isdisjoint(a.agents)


def test_a_canvas_saved_again_under_its_new_workflow_id_keeps_the_agent_ids_of_its_first_save(
    mapper: NodeMapper,
) -> None:
    first = mapper.map_canvas(save_payload())
    again = mapper.map_canvas({**save_payload(), "workflow_id": first.workflow_id})
    assert again.workflow_id == first.workflow_id and set(again.agents) == set(first.agents)
    edited = save_payload()
    edited["canvas_nodes"][0]["name"] = "Renamed"  # edited between the saves: still the same agents
    assert set(mapper.map_canvas({**edited, "workflow_id": first.workflow_id}).agents) == set(first.agents)


def test_an_unsafe_workflow_id_is_an_error(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas({**save_payload(), "workflow_id": "../../pwned"})
    assert [(d.level, d.field) for d in mapped.errors] == [("error", "workflow_id")]
    assert "'../../pwned'" in mapped.errors[0].message
    assert mapped.workflow_id.startswith("wf_")


def test_backend_ids_are_reused(mapper: NodeMapper) -> None:
    start = {**node(1, "Start"), "backend_id": "agt_a07f786cc7924cbebbc6799fc4a058b1"}
    agent = {**node(2, "Agent"), "agentId": "agt_451d4686e50b47a0944cf6a12a0d2e31"}
    odd = {**node(3, "End"), "backend_id": "not-an-agent-id"}
    mapped = mapper.map_canvas(chain(start, agent, odd, workflow_id="wf_x"))
    assert mapped.workflow["agents"] == [
        "agt_a07f786cc7924cbebbc6799fc4a058b1",
        "agt_451d4686e50b47a0944cf6a12a0d2e31",
        agent_id_for("wf_x", 3),
    ]


def test_a_connection_to_a_missing_node_is_a_diagnostic(mapper: NodeMapper) -> None:
    payload = canvas([node(1, "Start"), node(2, "End")], [(1, 2), (2, 99)])
    mapped = mapper.map_canvas(payload)
    (error,) = mapped.errors
    assert (error.node_id, error.field) == ("2", "connections[1].to")
    assert "99" in error.message
    assert len(mapped.workflow["connections"]) == 1


def test_duplicate_node_ids_are_an_error(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(canvas([node(1, "Start"), node(1, "End"), {"type": "Agent"}], []))
    assert [(d.node_id, d.field) for d in mapped.errors] == [
        ("1", "canvas_nodes[1].id"),
        (None, "canvas_nodes[2].id"),
    ]
    assert len(mapped.agents) == 1


def test_a_cycle_needs_a_loop_node(mapper: NodeMapper) -> None:
    plain = mapper.map_canvas(canvas([node(1, "Agent"), node(2, "Agent")], [(1, 2), (2, 1)]))
    assert [(d.level, d.field) for d in plain.diagnostics] == [("warning", "connections")]
    assert "1, 2" in plain.diagnostics[0].message and "put a Loop node in it" in plain.diagnostics[0].message
    branches = [
        {"type": "if", "condition": "done == false", "targetNodeId": 1},
        {"type": "else", "targetNodeId": 3},
    ]
    branched = mapper.map_canvas(
        canvas(
            [node(1, "Agent"), node(2, "Conditional", branches=branches), node(3, "End")],
            [(1, 2), (2, 1), (2, 3)],
        )
    )
    assert [(d.level, d.field) for d in branched.diagnostics] == [("warning", "connections")]
    looped = mapper.map_canvas(
        canvas(
            [node(1, "Loop", loopType="for", maxIterations=3), node(2, "Agent"), node(3, "End")],
            [(1, 2), (2, 1), (1, 3)],
        )
    )
    assert looped.diagnostics == []


def test_a_branch_to_a_missing_node_is_an_error(mapper: NodeMapper) -> None:
    branches = [{"condition": "x > 1", "targetNodeId": 42}, {"condition": "", "targetNodeId": 2}]
    mapped = mapper.map_canvas(canvas([node(1, "Conditional", branches=branches), node(2, "End")], [(1, 2)]))
    assert [(d.level, d.field) for d in mapped.diagnostics] == [("error", "config.branches[0].targetNodeId")]
    assert [b["type"] for b in next(iter(mapped.agents.values()))["metadata"]["branches"]] == ["if", "else"]


def test_an_api_node_without_url_is_an_error(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(chain(node(4, "API", method="FETCH")))
    assert {(d.node_id, d.field) for d in mapped.errors} == {("4", "config.url"), ("4", "config.method")}
    assert "'FETCH'" in next(d.message for d in mapped.errors if d.field == "config.method")


def test_a_payload_without_nodes_is_a_diagnostic_and_a_non_object_raises(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas({"connections": []})
    assert [(d.level, d.field) for d in mapped.diagnostics] == [("error", "nodes")]
    with pytest.raises(TypeError, match="str"):
        mapper.map_canvas("[]")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("types", "edges", "expected"),
    [
        (["Start", "Agent", "End"], [(1, 2), (2, 3)], "sequential"),
        (["Start", "Agent", "Agent", "End"], [(1, 2), (1, 3), (2, 4), (3, 4)], "parallel"),
        (["Start", "Conditional", "Agent", "End"], [(1, 2), (2, 3), (2, 4), (3, 4)], "hybrid"),
        (["Start", "Agent", "Subagent", "End"], [(1, 2), (2, 3), (3, 4)], "hierarchical"),
        (["Start", "Map", "End"], [(1, 2), (2, 3)], "parallel"),
        (["Agent"], [], "sequential"),
    ],
)
def test_the_execution_model_is_inferred_as_echoai_does(mapper: NodeMapper, types, edges, expected) -> None:
    nodes = [node(i + 1, t, branches=[{"condition": "", "targetNodeId": 3}]) for i, t in enumerate(types)]
    mapped = mapper.map_canvas(canvas(nodes, edges, execution_model="sequential"))
    assert mapped.workflow["execution_model"] == expected
    assert mapped.workflow["metadata"]["requested_execution_model"] == "sequential"
    if expected == "hierarchical":
        ids = mapped.workflow["agents"]
        assert mapped.workflow["hierarchy"] == {"master_agent": ids[1], "delegation_order": [ids[2]]}


def test_save_as_sets_echoais_status(mapper: NodeMapper) -> None:
    assert mapper.map_canvas({**save_payload(), "save_as": "temp"}).workflow["status"] == "testing"
    final = mapper.map_canvas({**save_payload(), "save_as": "final"}).workflow
    assert (final["status"], final["metadata"]["immutable"]) == ("final", True)


# -- reverse mapping ---------------------------------------------------------------------------------


def _rich_canvas() -> dict:
    tools = [
        {
            "id": 11,
            "tool_id": "tool_web_search",
            "name": "Web Search",
            "type": "local",
            "enabled": True,
            "config": {"type": "object", "properties": {}},
            "fixed": {"max_results": 5},
        },
        {
            "id": 12,
            "name": "Code Execution",
            "type": "code",
            "enabled": True,
            "config": {"language": "python", "code": "def main(x: int):\n    return x\n"},
        },
        {"id": 13, "name": "Calculator", "type": "tools", "enabled": False, "config": {"provider": "x"}},
        "File Reader",
        {"id": "tool_9a8b", "name": "Tool Code Reviewer", "type": "tools", "enabled": True, "config": {}},
    ]
    branches = [
        {"type": "if", "condition": "score > 5", "targetNodeId": 4},
        {"type": "else", "targetNodeId": 5},
    ]
    nodes = [
        node(
            1,
            "Start",
            inputVariables=[{"name": "topic", "type": "string", "required": True}],
            triggerType="manual",
        ),
        node(
            2,
            "Agent",
            "Researcher",
            prompt="Research it",
            tools=tools,
            temperature=0.2,
            role="Analyst",
            model={"provider": "openai", "modelName": "gpt-4o"},
            memory={"enabled": True},
        ),
        node(3, "Conditional", "Gate", branches=branches),
        node(4, "API", "Notify", method="post", url="http://127.0.0.1:9/hook", authentication="bearer"),
        node(5, "HITL", "Review", reviewTitle="Check", message="Look", allowedDecisions=["approve"]),
        node(6, "Code", "Compute", language="python", code="x = 1"),
        node(7, "End", outputVariables=[{"name": "result", "type": "string"}]),
    ]
    edges = [(1, 2), (2, 3), (3, 4), (3, 5), (4, 6), (5, 6), (6, 7)]
    return canvas(nodes, edges, workflow_id="wf_roundtrip")


def test_a_round_trip_gives_the_same_agents_and_tools(mapper: NodeMapper) -> None:
    first = mapper.map_canvas(_rich_canvas())
    assert first.ok, first.diagnostics
    back = mapper.to_canvas(first.workflow, first.agents)
    second = mapper.map_canvas(back)
    assert second.ok, second.diagnostics
    assert without_timestamps(second.agents) == without_timestamps(first.agents)
    assert second.workflow["connections"] == first.workflow["connections"]
    assert second.workflow["state_schema"] == first.workflow["state_schema"]


def test_the_reverse_mapping_keeps_tool_id(mapper: NodeMapper) -> None:
    mapped = mapper.map_canvas(_rich_canvas())
    back = mapper.to_canvas(mapped.workflow, mapped.agents)
    researcher = next(n for n in back["canvas_nodes"] if n["name"] == "Researcher")
    entries = {e.get("tool_id", e["name"]): e for e in researcher["config"]["tools"]}
    assert entries["tool_web_search"]["fixed"] == {"max_results": 5}
    assert entries["tool_code_reviewer"]["name"] == "Code Reviewer"
    (code,) = [e for e in researcher["config"]["tools"] if e["name"] == "Code Execution"]
    assert code["config"] == {"language": "python", "code": "def main(x: int):\n    return x\n"}
    assert code["type"] == "code" and code["tool_id"].startswith("code_")  # main is the tool
    assert {n["id"] for n in back["canvas_nodes"]} == {1, 2, 3, 4, 5, 6, 7}
    gate = next(n for n in back["canvas_nodes"] if n["name"] == "Gate")
    assert [b["targetNodeId"] for b in gate["config"]["branches"]] == [4, 5]


def test_echoais_stored_workflow_comes_back_to_the_canvas_with_tool_ids(
    corpus: Corpus, mapper: NodeMapper
) -> None:
    workflow = _load(corpus / "workflows" / "draft" / f"{corpus.web_search_workflow}.draft.json")
    agents = {a: _load(corpus / "agents" / f"{a}.json") for a in workflow["agents"]}
    back = mapper.to_canvas(workflow, agents)
    agent_node = back["canvas_nodes"][1]
    assert agent_node["config"]["tools"][0]["tool_id"] == "tool_web_search"
    assert [n["backend_id"] for n in back["canvas_nodes"]] == workflow["agents"]
    again = mapper.map_canvas(back)
    assert again.ok, again.diagnostics
    assert again.workflow["agents"] == workflow["agents"]  # ids survive the round trip
    assert again.workflow["state_schema"] == workflow["state_schema"]
    assert again.agents[workflow["agents"][1]]["tools"] == ["tool_web_search"]


def test_to_canvas_names_agents_that_are_missing(mapper: NodeMapper) -> None:
    with pytest.raises(ValueError, match="agt_gone"):
        mapper.to_canvas({"workflow_id": "wf_1", "agents": ["agt_gone"]}, {})


# -- robustness ----------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
_SMALL_IDS = st.integers(0, 4)
_IDS = st.one_of(_SMALL_IDS, _SMALL_IDS, _SMALL_IDS, st.sampled_from(["1", "2", "x", ""]), st.none(), _JSON)
_TOOL_ENTRY = st.one_of(
    st.sampled_from(["Web Search", "*", "Nope", "tool_calculator"]),
    st.fixed_dictionaries(
        {},
        optional={
            "tool_id": st.sampled_from(["tool_web_search", "tool_nope", "*"]) | _JSON,
            "name": st.sampled_from(["Calculator", "Tool File Reader", "x"]) | _JSON,
            "type": st.sampled_from(["local", "code", "mcp_server", "tools", "subworkflow"]) | _JSON,
            "enabled": _JSON,
            "config": _JSON,
            "fixed": st.dictionaries(st.sampled_from(["max_results", "query", "zzz"]), _JSON, max_size=2)
            | _JSON,
            "id": _IDS,
        },
    ),
    _JSON,
)
_CONFIG = st.fixed_dictionaries(
    {},
    optional={
        "tools": st.one_of(st.lists(_TOOL_ENTRY, max_size=4), st.lists(_TOOL_ENTRY, max_size=4), _JSON),
        "branches": st.lists(
            st.fixed_dictionaries({"targetNodeId": _IDS}, optional={"type": _JSON, "condition": _JSON})
        )
        | _JSON,
        "inputVariables": st.lists(
            st.fixed_dictionaries({"name": _JSON}, optional={"type": _JSON}), max_size=2
        )
        | _JSON,
        "outputVariables": _JSON,
        "model": st.fixed_dictionaries({}, optional={"provider": _JSON, "modelName": _JSON}) | _JSON,
        "temperature": _JSON,
        "maxTokens": _JSON,
        "url": _JSON,
        "method": _JSON,
        "headers": _JSON,
        "serverId": _JSON,
        "operation": _JSON,
        "code": _JSON,
        "tools_exclude": _JSON,
    },
)
_TYPES = st.sampled_from(["Start", "End", "Agent", "Agent", "Subagent", "Conditional", "API", "MCP", "Code"])
_NODE = st.fixed_dictionaries(
    {
        "id": _IDS,
        "type": st.one_of(_TYPES, _TYPES, _TYPES, _JSON),
        "config": st.one_of(_CONFIG, _CONFIG, _JSON),
    },
    optional={"name": _JSON, "backend_id": st.sampled_from(["agt_abc", "agt_def"]) | _JSON, "x": _JSON},
)
_PAYLOAD = st.fixed_dictionaries(
    {
        "canvas_nodes": st.lists(_NODE | _JSON, max_size=5),
        "connections": st.lists(st.fixed_dictionaries({"from": _IDS, "to": _IDS}) | _JSON, max_size=6)
        | _JSON,
    },
    optional={"workflow_id": _JSON, "workflow_name": _JSON, "save_as": _JSON, "metadata": _JSON},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(payload=_PAYLOAD)
def test_any_payload_maps_without_raising_and_maps_back(payload: dict) -> None:
    mapper = NodeMapper(_FUZZ_REGISTRY)
    mapped = mapper.map_canvas(payload)
    assert all(d.level in ("error", "warning") for d in mapped.diagnostics)
    assert set(mapped.workflow["agents"]) == set(mapped.agents)
    assert all(isinstance(t, str) for a in mapped.agents.values() for t in a["tools"])
    again = mapper.map_canvas(mapper.to_canvas(mapped.workflow, mapped.agents))
    assert set(again.agents) == set(mapped.agents)


_NAMED_ENTRY = st.one_of(
    st.sampled_from(["Web Search", "*", "Nope", "tool_calculator", "Tool File Reader", "code reviewer"]),
    st.fixed_dictionaries(
        {
            "name": st.sampled_from(
                ["Calculator", "Tool File Reader", "Web Search", "Unknown Tool", "Code Run"]
            )
        },
        optional={
            "id": st.integers(1, 50),
            "tool_id": st.sampled_from(["tool_web_search", "tool_calculator", "tool_gone"]),
            "type": st.sampled_from(["local", "code", "mcp_server", "tools", "subworkflow"]),
            "enabled": st.booleans(),
            "config": st.sampled_from(
                [{}, {"type": "object"}, {"language": "python", "code": "x = 1"}, {"precision": 3}]
            ),
            "fixed": st.dictionaries(
                st.sampled_from(["max_results", "precision", "query"]), st.integers(1, 9), max_size=2
            ),
            "description": st.sampled_from(["custom words", ""]),
            "description_override": st.sampled_from(["custom words", ""]),
        },
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entries=st.lists(st.lists(_NAMED_ENTRY, max_size=5), min_size=1, max_size=3))
def test_any_tool_entries_bind_registry_ids_and_survive_the_round_trip(entries: list) -> None:
    mapper = NodeMapper(_FUZZ_REGISTRY)
    nodes = [node(i + 1, "Agent", tools=tools) for i, tools in enumerate(entries)]
    mapped = mapper.map_canvas(chain(*nodes, workflow_id="wf_fuzz"))
    for agent in mapped.agents.values():
        for tool_id in agent["tools"]:
            assert tool_id == "*" or tool_id.startswith("builtin_") or _FUZZ_REGISTRY.get(tool_id) is not None
        assert len({b["tool_id"] for b in agent["tool_bindings"]}) == len(agent["tool_bindings"])
    assert all(d.field and d.field.startswith("config.tools") for d in mapped.diagnostics)
    again = mapper.map_canvas(mapper.to_canvas(mapped.workflow, mapped.agents))
    assert without_timestamps(again.agents) == without_timestamps(mapped.agents)


def test_agents_from_echoais_templates_bind_known_tools_and_name_the_rest(
    corpus: Corpus, mapper: NodeMapper
) -> None:
    templates = _load(corpus / "agents" / "agent_templates.json")["templates"]
    nodes = []
    for index, template in enumerate(templates, start=1):
        settings_ = template.get("settings") or {}
        config = {
            "prompt": template["prompt"],
            "tools": template["tools"],  # display names, as addAgentFromTemplate copies them
            "temperature": settings_.get("temperature", 0.7),
            "maxTokens": settings_.get("max_token", 4000),
            "maxIterations": settings_.get("max_iteration", 5),
            "variables": template.get("variables", []),
        }
        nodes.append(node(index, "Agent", template["name"], **config))
    mapped = mapper.map_canvas(canvas(nodes, []))
    research = _by_name(mapped)[corpus.template]
    assert research["tools"] == ["tool_web_search"]
    assert research["metadata"]["canvas_extra"]["variables"][0]["name"] == corpus.template_variable
    unknown = {(d.node_id, d.message.split("tool ")[1].split(" is not")[0]) for d in mapped.errors}
    assert templates[0]["name"] == corpus.template  # node 1
    assert all(("1", repr(name)) in unknown for name in corpus.template_unknown_tools)
    names = {t for template in templates for t in template["tools"]}
    assert len(mapped.errors) == sum(1 for t in templates for name in t["tools"] if name != "Web Search")
    assert "Web Search" in names
    assert all(t in ("tool_web_search",) for a in mapped.agents.values() for t in a["tools"])


def test_a_description_override_is_explicit_and_survives_the_round_trip(mapper: NodeMapper) -> None:
    entry = {
        "id": 7,
        "tool_id": "tool_web_search",
        "name": "Web Search",
        "type": "local",
        "enabled": True,
        "description": "an old copy the IDE made",
        "description_override": "Search the web for recent news only.",
    }
    mapped = mapper.map_canvas(chain(node(1, "Agent", tools=[entry]), workflow_id="wf_desc"))
    (agent,) = mapped.agents.values()
    assert agent["tool_bindings"][0]["description"] == "Search the web for recent news only."
    again = mapper.map_canvas(mapper.to_canvas(mapped.workflow, mapped.agents))
    assert without_timestamps(again.agents) == without_timestamps(mapped.agents)
