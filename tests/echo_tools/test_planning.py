"""The planner maps capabilities to tools with fallback chains, orders dependencies, and refuses cycles."""

from __future__ import annotations

from pathlib import Path

import pytest

from echo_tools import ToolDef, ToolNotFoundError, ToolRegistrationError, ToolRegistry
from echo_tools.planning import Plan, dependency_graph, plan

MODULE = "tests.echo_tools.fixture_tools.basic"


def _tool(tool_id: str, **fields: object) -> ToolDef:
    return ToolDef(
        tool_id=tool_id,
        name=tool_id.replace("_", " "),
        execution_config={"module": MODULE, "function": "echo"},
        **fields,
    )


@pytest.fixture
def registry(tmp_path: Path) -> ToolRegistry:
    reg = ToolRegistry(storage_dir=tmp_path, allowed_modules=["tests"])
    reg.register(
        _tool(
            "fetch_a",
            capabilities=["fetch"],
            side_effect="external",
            input_schema={"type": "object", "properties": {"url": {"type": "string"}}},
            output_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        )
    )
    reg.register(_tool("fetch_b", capabilities=["fetch"], side_effect="idempotent"))
    reg.register(
        _tool(
            "summarise",
            capabilities=["summarise"],
            dependencies=["clean"],
            input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        )
    )
    reg.register(_tool("clean", capabilities=["clean"]))
    return reg


def test_capability_matching_orders_providers_and_keeps_the_rest_as_fallbacks(registry: ToolRegistry) -> None:
    got = plan(registry, ["fetch"], {"url": "http://127.0.0.1/"})
    assert [(s.tool, s.fallback) for s in got.steps] == [("fetch_b", ["fetch_a"])]
    assert got.output == "$.steps.s1.output"


def test_dependencies_run_first_and_inputs_flow_from_earlier_outputs(registry: ToolRegistry) -> None:
    got = plan(registry, ["fetch_a", "summarise"], {"url": "x"})
    assert [s.tool for s in got.steps] == ["fetch_a", "clean", "summarise"]
    fetch, clean, summarise = got.steps
    assert fetch.input == {"url": "$.input.url"}
    assert summarise.depends_on == [clean.id]
    assert summarise.input == {"text": "$.steps.s1.output.text"}
    assert got.execution_config()["steps"][2]["tool"] == "summarise"
    assert Plan.model_validate(got.execution_config()) == got


def test_a_tool_named_directly_is_planned_as_is(registry: ToolRegistry) -> None:
    assert [s.tool for s in plan(registry, ["fetch a"]).steps] == ["fetch_a"]


def test_an_unknown_capability_names_it_and_suggests_a_close_one(registry: ToolRegistry) -> None:
    with pytest.raises(ToolNotFoundError, match=r"capability 'fetc'.*did you mean 'fetch'\?") as info:
        plan(registry, ["fetc"])
    assert info.value.field == "capabilities"
    with pytest.raises(ValueError, match="capabilities must name at least one"):
        plan(registry, [])


def test_a_dependency_cycle_is_refused_with_the_chain(tmp_path: Path) -> None:
    reg = ToolRegistry(storage_dir=tmp_path, allowed_modules=["tests"])
    reg.register(_tool("a", capabilities=["go"], dependencies=["b"]))
    reg.register(_tool("b", dependencies=["c"]))
    reg.register(_tool("c", dependencies=["a"]))
    with pytest.raises(ToolRegistrationError, match="dependencies form a cycle: a -> b -> c -> a"):
        plan(reg, ["go"])


def test_an_unknown_dependency_is_named(tmp_path: Path) -> None:
    reg = ToolRegistry(storage_dir=tmp_path, allowed_modules=["tests"])
    reg.register(_tool("a", capabilities=["go"], dependencies=["ghost"]))
    with pytest.raises(ToolRegistrationError, match="'a' depends on 'ghost', which is not an active tool"):
        plan(reg, ["go"])


def test_disabled_tools_are_never_planned(registry: ToolRegistry) -> None:
    registry.register(_tool("fetch_b", capabilities=["fetch"], status="disabled"))
    assert [s.tool for s in plan(registry, ["fetch"]).steps] == ["fetch_a"]


def test_the_dependency_graph_lists_nodes_and_edges(registry: ToolRegistry) -> None:
    graph = dependency_graph(registry.list_all())
    assert graph == {"nodes": ["clean", "fetch_a", "fetch_b", "summarise"], "edges": [["clean", "summarise"]]}
