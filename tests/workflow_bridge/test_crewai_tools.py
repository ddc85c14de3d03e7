"""CrewAI adapter: real Agents, Tasks and Crews, driven by scripted LLMs, calling catalogue tools."""

from __future__ import annotations

import json
import typing
import warnings

import pytest

# crewai 1.15's own import trips an ImportWarning (crewai.rag refuses the attribute for its child module
# 'embeddings'), which filterwarnings=error would turn into a collection error.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from crewai import Agent, Crew, Task
    from crewai.tools.tool_failure import ToolFailure, ToolFailureReason
    from crewai.utilities.string_utils import sanitize_tool_name

    from echo_tools.errors import ToolNotFoundError
    from echo_tools.events import MemoryEventLog
    from echo_tools.models import ToolContext, ToolDef, ToolResult
    from echo_tools.registry import ToolRegistry
    from tests.conftest import MANIFESTS
    from tests.workflow_bridge._fake_llms import FunctionCallingLLM, ReActTextLLM
    from workflow_bridge.crewai_tools import ExecutorCrewTool, to_crewai_tool, to_crewai_tools

CONTEXT = ToolContext(agent_id="agent-7", workflow_id="wf-1", run_id="run-1", node_id="node-3")
CORPUS_TOOLS = list(MANIFESTS)  # the same five manifests in our fixtures and in the real corpus


def run_crew(llm: typing.Any, tools: list[ExecutorCrewTool]) -> typing.Any:
    agent = Agent(
        role="Analyst", goal="Use the tools", backstory="Careful.", llm=llm, tools=tools, max_iter=6
    )
    task = Task(description="Use the tools as needed.", expected_output="A short report.", agent=agent)
    return Crew(agents=[agent], tasks=[task]).kickoff()


def ended(log: MemoryEventLog) -> list[typing.Any]:
    return [e for e in log.events if e.type != "tool.invoked"]


# -- wrapping --------------------------------------------------------------------------------------


def test_args_schema_keeps_nested_objects_arrays_enums_defaults_and_descriptions(registry, executor):
    lookup = to_crewai_tool(registry.require("lookup"), executor)
    fields = lookup.args_schema.model_fields
    assert fields["query"].is_required() and fields["query"].description == "What to look up"
    assert typing.get_args(typing.get_args(fields["mode"].annotation)[0]) == ("fast", "deep")
    assert fields["region"].default == "eu"
    assert typing.get_args(fields["tags"].annotation)[0] == list[str]

    configure = to_crewai_tool(registry.require("configure"), executor)
    settings_model = configure.args_schema.model_fields["settings"].annotation
    owner_model = typing.get_args(settings_model.model_fields["owner"].annotation)[0]
    assert owner_model.model_fields["id"].is_required()

    schema = lookup.args_schema.model_json_schema()
    assert schema["properties"]["mode"] == {
        "anyOf": [{"type": "string", "enum": ["fast", "deep"]}, {"type": "null"}],
        "description": "How hard to look",
    }
    assert schema["required"] == ["query"]


def test_a_schema_crewai_cannot_convert_is_still_presented_and_called_as_is(registry, executor, log):
    odd = {"type": "object", "properties": {"model_config": {"type": "string"}, "x-y": {"type": "integer"}}}
    registry.register(
        {
            "name": "Odd",
            "input_schema": {**odd, "required": ["x-y"]},
            "execution_config": {"module": "tests.workflow_bridge.fixture_tools.basic", "function": "lookup"},
        }
    )
    tool = to_crewai_tool(registry.require("odd"), executor)
    assert tool.args_schema.model_json_schema()["required"] == ["x-y"]
    assert tool.args_schema.model_validate({"x-y": 1}).model_dump() == {"x-y": 1}
    failure = tool.run(**{"x-y": "one"})
    assert failure.message.startswith("Tool 'odd' failed (validation): invalid input: input.x-y: \"one\"")


def test_unset_optional_fields_are_left_out_when_crewai_dumps_the_args_model(registry, executor):
    lookup = to_crewai_tool(registry.require("lookup"), executor)
    assert lookup.args_schema.model_validate({"query": "q"}).model_dump() == {"query": "q"}


def test_llm_names_are_crewai_safe_unique_and_map_back_to_tool_ids(registry, executor):
    registry.register({"name": "Web Search v2 (beta)", "tool_type": "local", "description": "search"})
    tools = to_crewai_tools(["add", "tool_add", "Web Search v2 (beta)", "lookup"], registry, executor)
    assert [t.name for t in tools] == ["add", "web_search_v2_beta", "lookup"]
    for tool in tools:
        assert sanitize_tool_name(tool.name) == tool.name
        assert registry.resolve(tool.name).tool_id == tool.tool_id


def test_disabled_bindings_are_left_out_and_unknown_refs_are_named(registry, executor):
    tools = to_crewai_tools([{"tool_id": "tool_add", "enabled": False}, "lookup"], registry, executor)
    assert [t.name for t in tools] == ["lookup"]
    with pytest.raises(ToolNotFoundError, match="'no_such_tool'"):
        to_crewai_tools(["no_such_tool"], registry, executor)


def test_binding_hides_fixed_parameters_and_merges_them_into_every_call(registry, executor, log):
    binding = {"tool_id": "tool_lookup", "fixed": {"limit": 3, "mode": "deep"}, "description": "Find things."}
    (tool,) = to_crewai_tools([binding], registry, executor, CONTEXT)
    assert tool.description == "Find things."
    assert set(tool.args_schema.model_json_schema()["properties"]) == {"query", "tags", "region"}
    assert "limit" not in tool.formatted_description

    output = json.loads(tool.run(query="q", limit=50))
    assert output == {"query": "q", "options": {"limit": 3, "mode": "deep", "region": "eu"}}


def test_binding_that_fixes_an_unknown_parameter_names_it(registry, executor):
    with pytest.raises(ValueError, match="fixed parameter 'colour'"):
        to_crewai_tool(registry.require("lookup"), executor, binding={"fixed": {"colour": "red"}})


# -- calling ---------------------------------------------------------------------------------------


def test_run_returns_json_text_and_events_carry_the_bound_agents_context(registry, executor, log):
    tool = to_crewai_tool(registry.require("lookup"), executor, CONTEXT)
    assert tool.run(query="weather") == '{"query": "weather", "options": {"region": "eu"}}'
    completed = log.of_type("tool.completed")[-1]
    assert (completed.agent_id, completed.workflow_id, completed.run_id, completed.node_id) == (
        "agent-7",
        "wf-1",
        "run-1",
        "node-3",
    )


async def test_sync_run_inside_a_running_loop_and_async_arun_both_reach_the_executor(registry, executor, log):
    add = to_crewai_tool(registry.require("add"), executor, CONTEXT)
    assert add.run(a=1, b=2) == "3"  # a loop is running here: the call goes to the background loop
    assert await add.arun(a=2, b=2) == "4"
    assert [e.type for e in log.events] == ["tool.invoked", "tool.completed"] * 2


def test_failures_are_tool_failures_whose_text_says_what_to_fix(registry, executor):
    add = to_crewai_tool(registry.require("add"), executor)
    failure = add.run(a=1, b="two")
    assert isinstance(failure, ToolFailure)
    assert failure.reason is ToolFailureReason.INVALID_INPUT
    assert failure.message.startswith("Tool 'add' failed (validation): invalid input: input.b: \"two\"")
    assert failure.message.endswith("Fix the arguments and try again.")

    explode = to_crewai_tool(registry.require("explode"), executor)
    failure = explode.run(reason="boom")
    assert failure.reason is ToolFailureReason.TOOL_REPORTED
    assert "(execution)" in failure.message and "exploded: boom" in failure.message


def test_native_function_calling_crew_calls_tools_through_the_executor(registry, executor, log):
    llm = FunctionCallingLLM(
        [[{"name": "add", "args": {"a": 2, "b": 3}}, {"name": "lookup", "args": {"query": "q"}}]]
    )
    result = run_crew(llm, to_crewai_tools(["add", "lookup"], registry, executor, CONTEXT))

    # CrewAI runs the two native calls of one turn in parallel threads: compare without order
    assert sorted((e.type, e.tool_id) for e in ended(log)) == [
        ("tool.completed", "tool_add"),
        ("tool.completed", "tool_lookup"),
    ]
    assert {e.agent_id for e in log.events} == {"agent-7"} and {e.node_id for e in log.events} == {"node-3"}
    assert sorted(llm.observations()) == ["5", '{"query": "q", "options": {"region": "eu"}}']
    assert {t["function"]["name"] for t in llm.requests[0]["tools"]} == {"add", "lookup"}
    assert result.raw.startswith("Done.")


def test_react_text_crew_calls_tools_through_the_executor(registry, executor, log):
    llm = ReActTextLLM(
        [[{"name": "add", "args": {"a": 2, "b": 3}}], [{"name": "lookup", "args": {"query": "q"}}]]
    )
    run_crew(llm, to_crewai_tools(["add", "lookup"], registry, executor, CONTEXT))

    assert [(e.type, e.tool_id, e.agent_id) for e in log.events] == [
        ("tool.invoked", "tool_add", "agent-7"),
        ("tool.completed", "tool_add", "agent-7"),
        ("tool.invoked", "tool_lookup", "agent-7"),
        ("tool.completed", "tool_lookup", "agent-7"),
    ]
    assert llm.observations() == ["5", '{"query": "q", "options": {"region": "eu"}}']


@pytest.mark.parametrize("llm_class", [FunctionCallingLLM, ReActTextLLM])
async def test_async_crews_call_tools_through_the_executor(registry, executor, log, llm_class):
    llm = llm_class([[{"name": "add", "args": {"a": 2, "b": 3}}]])
    agent = Agent(
        role="Analyst",
        goal="Add",
        backstory="Careful.",
        llm=llm,
        tools=to_crewai_tools(["add"], registry, executor, CONTEXT),
    )
    crew = Crew(agents=[agent], tasks=[Task(description="Add.", expected_output="A sum.", agent=agent)])
    result = await crew.akickoff()
    assert result.raw == "Done. Last tool result: 5"
    assert [(e.type, e.agent_id) for e in log.events] == [
        ("tool.invoked", "agent-7"),
        ("tool.completed", "agent-7"),
    ]


@pytest.mark.parametrize("llm_class", [FunctionCallingLLM, ReActTextLLM])
def test_optional_fields_the_llm_leaves_out_never_reach_the_tool_as_none(registry, executor, log, llm_class):
    nulls = {"query": "q", "limit": None, "tags": None, "mode": None, "region": None}
    nested = {"settings": {"name": "n", "retries": None, "owner": {"id": "u1", "email": None}}, "label": None}
    llm = llm_class([[{"name": "lookup", "args": nulls}], [{"name": "configure", "args": nested}]])
    run_crew(llm, to_crewai_tools(["lookup", "configure"], registry, executor, CONTEXT))

    assert [e.type for e in ended(log)] == ["tool.completed", "tool.completed"], [e.error for e in log.events]
    assert log.of_type("tool.completed")[0].output == {"query": "q", "options": {"region": "eu"}}
    assert log.of_type("tool.completed")[1].output == {
        "settings": {"name": "n", "owner": {"id": "u1"}},
        "label": "default",
    }


@pytest.mark.parametrize("llm_class", [FunctionCallingLLM, ReActTextLLM])
def test_failed_calls_reach_the_llm_as_observations_and_crewai_records_them(registry, executor, llm_class):
    llm = llm_class(
        [[{"name": "add", "args": {"a": "x", "b": 3}}], [{"name": "explode", "args": {"reason": "r"}}]]
    )
    result = run_crew(llm, to_crewai_tools(["add", "explode"], registry, executor, CONTEXT))

    seen = llm.observations()
    assert seen[0].startswith("Tool 'add' failed (validation): invalid input: input.a: \"x\"")
    assert seen[1].startswith("Tool 'explode' failed (execution)")
    failures = result.tasks_output[0].tool_failures
    assert [(f.tool_name, f.failure.reason) for f in failures] == [
        ("add", ToolFailureReason.INVALID_INPUT),
        ("explode", ToolFailureReason.TOOL_REPORTED),
    ]


# -- manifests in EchoAI's format (our fixtures, and the real corpus when present) ---------------------------


def sample_args(schema: dict[str, typing.Any]) -> dict[str, typing.Any]:
    """Arguments a schema allows: every required field, plus optional ones the LLM sends as null."""
    values = {"string": "text", "integer": 2, "number": 1.5, "boolean": True, "array": [], "object": {}}
    out: dict[str, typing.Any] = {}
    for key, prop in schema["properties"].items():
        if key in schema.get("required", []):
            if "enum" in prop:
                out[key] = prop["enum"][0]
            elif prop.get("type") == "object" and "properties" in prop:
                out[key] = sample_args(prop)
            else:
                out[key] = values[prop["type"]]
        else:
            out[key] = None
    return out


@pytest.mark.parametrize("name", CORPUS_TOOLS)
def test_corpus_manifests_wrapped_for_crewai_accept_the_calls_their_schemas_allow(corpus, executor, name):
    manifest = json.loads((corpus / "manifests" / f"{name}.json").read_text())
    catalogue = ToolRegistry(allowed_modules=["AgentTools"])
    catalogue.register(manifest)
    tool = catalogue.require(manifest["tool_id"])
    crew_tool = to_crewai_tool(tool, executor, CONTEXT)

    assert crew_tool.name == sanitize_tool_name(tool.llm_name) and crew_tool.tool_id == tool.tool_id
    llm_schema = crew_tool.args_schema.model_json_schema()
    assert set(llm_schema["properties"]) == set(tool.input_schema["properties"])
    args = sample_args(tool.input_schema)
    crew_tool.args_schema.model_validate(args)  # what CrewAI's strict schema lets the model send
    sent = crew_tool.view.call_args(args)
    assert None not in sent.values()
    assert catalogue.input_errors(tool.tool_id, sent) == []


def test_calculator_manifest_keeps_its_nested_number_arrays(corpus, executor):
    manifest = json.loads((corpus / "manifests" / "calculator.json").read_text())
    crew_tool = to_crewai_tool(ToolDef.model_validate(manifest), executor)
    fields = crew_tool.args_schema.model_fields
    assert typing.get_args(fields["matrices"].annotation)[0] == list[list[list[float]]]
    assert fields["precision"].default == 2
    props = crew_tool.args_schema.model_json_schema()["properties"]
    assert props["operation"]["enum"][:3] == ["add", "subtract", "multiply"]


def test_results_are_tool_results_in_the_executor_and_text_for_crewai(registry, executor):
    result = executor.invoke_sync("tool_add", {"a": 1, "b": 1})
    assert isinstance(result, ToolResult) and result.output == 2
    assert to_crewai_tool(registry.require("add"), executor).run(a=1, b=1) == "2"
