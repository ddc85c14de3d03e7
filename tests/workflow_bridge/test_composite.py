"""`workflow` and `agent` tools: stored EchoAI workflows and agents run as tools, with real compiled LangGraph
graphs and real CrewAI crews on the offline rehearsal model; nested calls inherit the caller's limits."""

from __future__ import annotations

from typing import Any

import pytest

from echo_tools.errors import ToolRegistrationError
from echo_tools.models import ToolContext, ToolPermission
from echo_tools.registry import ToolRegistry
from echo_tools.stores import AgentStore, WorkflowStore
from tests.workflow_bridge._compiler_support import MODULE, agent, make_executor, tool_definitions, workflow


def _stores(tmp_path, *pairs: tuple[dict[str, Any], dict[str, dict[str, Any]]], state: str = "draft"):
    workflows, agents = WorkflowStore(tmp_path / "workflows"), AgentStore(tmp_path / "agents")
    for wf, wf_agents in pairs:
        workflows.save(wf, state=state)
        for a in wf_agents.values():
            agents.save(a)
    return workflows, agents


def _registry(workflows: WorkflowStore | None, agents: AgentStore | None) -> ToolRegistry:
    registry = ToolRegistry(allowed_modules=[MODULE], workflows=workflows, agents=agents)
    for definition in tool_definitions():
        registry.register(definition)
    return registry


def _research(workflow_id: str = "wf_research", tools: list[str] | None = None, **agent_fields: Any):
    """Start -> Researcher (echo tool) -> End, EchoAI shapes; the Start node declares a `topic` variable."""
    start = agent(
        f"agt_{workflow_id}_start",
        "Start",
        name="Question In",
        input_schema=["topic"],
        metadata={"input_variables": [{"name": "topic", "type": "string", "defaultValue": "markets"}]},
    )
    researcher = agent(
        f"agt_{workflow_id}_researcher",
        name="Researcher",
        prompt="Look the topic up.",
        tools=tools if tools is not None else ["Echo"],
        output_schema=["findings"],
        **agent_fields,
    )
    end = agent(f"agt_{workflow_id}_end", "End", name="Answer Out")
    return workflow(
        [start, researcher, end],
        [(start["agent_id"], researcher["agent_id"]), (researcher["agent_id"], end["agent_id"])],
        workflow_id=workflow_id,
    )


def _workflow_tool(tool_id: str = "research", workflow_id: str = "wf_research", **extra: Any) -> dict:
    return {
        "tool_id": tool_id,
        "name": extra.pop("name", "Research"),
        "description": "Runs the stored Research workflow.",
        "tool_type": "workflow",
        "execution_config": {"workflow_id": workflow_id, **extra.pop("config", {})},
        **extra,
    }


def _done(events, run_prefix: str | None = None) -> list[tuple[str, str | None]]:
    return [
        (e.tool_id, e.run_id)
        for e in events
        if e.type == "tool.completed" and (run_prefix is None or (e.run_id or "").startswith(run_prefix))
    ]


# -- workflow tools ------------------------------------------------------------------------------------


async def test_a_workflow_tool_runs_the_stored_workflow_and_names_its_inner_tool_calls(tmp_path):
    registry = _registry(*_stores(tmp_path, _research()))
    registry.register(_workflow_tool())
    executor, log = make_executor(registry)

    result = await executor.invoke(
        "Research", {"user_input": "copper prices"}, ToolContext(run_id="run_outer")
    )

    assert result.success, result.error
    assert "echo: " in result.output["crew_result"] and "copper prices" in result.output["crew_result"]
    assert result.output["result"] == result.output["crew_result"]
    assert result.output["outputs"] == {"findings": result.output["crew_result"]}
    sub_run = result.metadata["run_id"]
    assert sub_run.startswith("run_outer/research/")
    assert result.metadata["tool_calls"] == [
        {"tool_id": "tool_echo", "agent_id": "agt_wf_research_researcher", "status": "completed"}
    ]
    # the event stream shows the inner call under the sub-run, inside the outer call
    kinds = [(e.type, e.tool_id, e.run_id) for e in log.events]
    outer_start = kinds.index(("tool.invoked", "research", "run_outer"))
    inner_done = kinds.index(("tool.completed", "tool_echo", sub_run))
    outer_done = kinds.index(("tool.completed", "research", "run_outer"))
    assert outer_start < inner_done < outer_done
    assert log.events[outer_done].metadata["tool_calls"][0]["tool_id"] == "tool_echo"
    await executor.aclose()


async def test_the_input_schema_comes_from_the_start_node_variables(tmp_path):
    registry = _registry(*_stores(tmp_path, _research()))
    registry.register(_workflow_tool())
    schema = registry.resolve("research").input_schema
    assert schema["properties"]["user_input"]["type"] == "string"
    assert schema["properties"]["topic"] == {"type": "string", "default": "markets"}

    executor, log = make_executor(registry)
    result = await executor.invoke("research", {"user_input": "tin", "topic": "metals"})
    assert result.success, result.error
    invoked = [e for e in log.events if e.type == "tool.invoked" and e.tool_id == "research"][0]
    assert invoked.input == {"user_input": "tin", "topic": "metals"}
    await executor.aclose()


def test_a_workflow_without_start_variables_takes_user_input(tmp_path):
    wf, agents = workflow([agent("agt_solo", tools=["Echo"])], [], workflow_id="wf_solo")
    registry = _registry(*_stores(tmp_path, (wf, agents)))
    registry.register(_workflow_tool("solo", "wf_solo", name="Solo"))
    schema = registry.resolve("solo").input_schema
    assert list(schema["properties"]) == ["user_input"] and schema["required"] == ["user_input"]


async def test_a_sub_workflow_inside_a_workflow_runs_two_levels_deep(tmp_path):
    inner = _research()
    outer_agent = agent("agt_lead", name="Lead", tools=["Research"], output_schema=["report"])
    outer = workflow([outer_agent], [], workflow_id="wf_outer")
    registry = _registry(*_stores(tmp_path, inner, outer))
    registry.register(_workflow_tool())
    registry.register(_workflow_tool("outer", "wf_outer", name="Outer"))
    executor, log = make_executor(registry)

    result = await executor.invoke("outer", {"user_input": "zinc"}, ToolContext(run_id="run_top"))

    assert result.success, result.error
    assert result.metadata["tool_calls"] == [
        {"tool_id": "research", "agent_id": "agt_lead", "status": "completed"}
    ]
    echo_runs = [run for tool, run in _done(log.events) if tool == "tool_echo"]
    assert len(echo_runs) == 1 and echo_runs[0].startswith(result.metadata["run_id"] + "/research/")
    assert "echo: " in result.output["outputs"]["report"]
    await executor.aclose()


async def test_an_agents_permissions_list_is_exactly_what_its_tools_run_with(tmp_path):
    pair = _research(tools=["Echo", "Score"], permissions=["fs:read"])
    registry = _registry(*_stores(tmp_path, pair))
    registry.register({**tool_definitions()[1], "permissions": ["net:outbound"]})  # Score needs the network
    registry.register(_workflow_tool())
    executor, log = make_executor(registry)

    # the caller grants everything; the agent grants only fs:read, so Score is refused, Echo runs
    granted = list(ToolPermission)
    result = await executor.invoke(
        "research", {"user_input": "lead"}, ToolContext(granted_permissions=granted)
    )

    assert result.success, result.error
    calls = {c["tool_id"]: c for c in result.metadata["tool_calls"]}
    assert calls["tool_echo"]["status"] == "completed"
    assert calls["tool_score"]["status"] == "failed" and "net:outbound" in calls["tool_score"]["error"]
    refused = [e for e in log.events if e.tool_id == "tool_score" and e.type == "tool.failed"][0]
    assert refused.error_type == "permission_denied"
    await executor.aclose()


async def test_the_callers_grant_passes_down_and_is_intersected_with_the_agents(tmp_path):
    pair = _research(tools=["Echo", "Score"], permissions=["fs:read", "net:outbound"])
    registry = _registry(*_stores(tmp_path, pair))
    registry.register({**tool_definitions()[1], "permissions": ["net:outbound"]})
    registry.register({**tool_definitions()[0], "permissions": ["fs:read"]})
    registry.register(_workflow_tool())
    # the composite needs what its inner tools need
    assert set(registry.resolve("research").permissions) == {
        ToolPermission.FS_READ,
        ToolPermission.NET_OUTBOUND,
    }
    executor, log = make_executor(registry)

    refused = await executor.invoke(
        "research", {"user_input": "x"}, ToolContext(granted_permissions=[ToolPermission.FS_READ])
    )
    assert not refused.success and refused.error_type == "permission_denied"
    assert not [e for e in log.events if e.tool_id in ("tool_echo", "tool_score")]  # nothing inner ran
    await executor.aclose()


async def test_inner_calls_carry_depth_call_path_and_parent_call_id(tmp_path):
    seen: list[ToolContext] = []

    registry = _registry(*_stores(tmp_path, _research()))
    registry.register(_workflow_tool())
    executor, _ = make_executor(registry)
    # read what the adapter builds, through its public method, while the workflow runs
    from workflow_bridge.crewai_adapter import CrewAIAdapter

    adapter_context = CrewAIAdapter.context

    def spy(self, agent_def, state, node_id):
        ctx = adapter_context(self, agent_def, state, node_id)
        seen.append(ctx)
        return ctx

    CrewAIAdapter.context = spy  # type: ignore[method-assign]
    try:
        caller = ToolContext(
            run_id="run_p", call_id="call_1", depth=2, call_path=["a", "b"], timeout_ms=20_000,
            granted_permissions=[ToolPermission.FS_READ],
        )  # fmt: skip
        result = await executor.invoke("research", {"user_input": "q"}, caller)
    finally:
        CrewAIAdapter.context = adapter_context  # type: ignore[method-assign]
    assert result.success, result.error
    ctx = seen[0]
    assert ctx.depth == 3 and ctx.call_path == ["a", "b", "research"] and ctx.parent_call_id == "call_1"
    assert ctx.granted_permissions == [ToolPermission.FS_READ]
    assert 0 < (ctx.timeout_ms or 0) <= 20_000
    await executor.aclose()


# -- agent tools ---------------------------------------------------------------------------------------


async def test_an_agent_tool_runs_one_crewai_agent_with_its_own_tools(tmp_path):
    agents = AgentStore(tmp_path / "agents")
    agents.save(agent("agt_writer", name="Writer", tools=["Echo"], prompt="Write it up."))
    registry = _registry(None, agents)
    registry.register({"tool_id": "writer", "name": "Writer", "tool_type": "agent",
                       "execution_config": {"agent_id": "agt_writer"}})  # fmt: skip
    assert registry.resolve("writer").input_schema["required"] == ["task"]
    executor, log = make_executor(registry)

    result = await executor.invoke("writer", {"task": "summarise nickel", "context": "prices rose"})

    assert result.success, result.error
    assert set(result.output) == {"result"} and "echo: " in result.output["result"]
    assert result.metadata["tool_calls"] == [
        {"tool_id": "tool_echo", "agent_id": "agt_writer", "status": "completed"}
    ]
    inner = [e for e in log.events if e.type == "tool.invoked" and e.tool_id == "tool_echo"][0]
    assert inner.run_id == result.metadata["run_id"] and "summarise nickel" in str(inner.input)
    await executor.aclose()


# -- cycles and depth ----------------------------------------------------------------------------------


def test_a_workflow_reaching_itself_is_refused_at_registration_with_the_chain(tmp_path):
    registry = _registry(*_stores(tmp_path, _research(tools=["Echo", "Research"])))
    with pytest.raises(ToolRegistrationError) as info:
        registry.register(_workflow_tool())
    assert info.value.field == "execution_config" and "research -> research" in str(info.value)
    assert registry.resolve("research") is None


async def test_a_cycle_found_at_run_time_is_refused_with_the_chain(tmp_path):
    # registered before its workflow named it: only the run can see the cycle
    workflows, agents = _stores(tmp_path, _research())
    registry = _registry(workflows, agents)
    registry.register(_workflow_tool())
    workflows.save(_research(tools=["Echo", "Research"])[0])
    for a in _research(tools=["Echo", "Research"])[1].values():
        agents.save(a)
    executor, log = make_executor(registry)

    result = await executor.invoke("research", {"user_input": "loop"})

    assert result.success, result.error  # the agent gets the refusal as a tool failure and answers
    failed = [c for c in result.metadata["tool_calls"] if c["tool_id"] == "research"]
    assert failed and failed[0]["status"] == "failed" and "research -> research" in failed[0]["error"]
    await executor.aclose()


async def test_a_call_deeper_than_the_limit_is_refused_naming_it(tmp_path):
    registry = _registry(*_stores(tmp_path, _research()))
    registry.register(_workflow_tool())
    executor, _ = make_executor(registry)
    result = await executor.invoke("research", {"user_input": "x"}, ToolContext(depth=8, call_path=["s"] * 8))
    assert not result.success and "the limit is 8" in result.error
    await executor.aclose()


# -- bad input -----------------------------------------------------------------------------------------


def test_a_workflow_id_that_is_not_stored_is_refused_naming_the_field_and_value(tmp_path):
    registry = _registry(*_stores(tmp_path, _research()))
    with pytest.raises(ToolRegistrationError) as info:
        registry.register(_workflow_tool(workflow_id="wf_missing"))
    assert info.value.field == "execution_config.workflow_id" and "'wf_missing'" in str(info.value)
    assert registry.resolve("research") is None


def test_a_version_that_is_not_stored_is_refused_naming_the_field_and_value(tmp_path):
    registry = _registry(*_stores(tmp_path, _research()))
    with pytest.raises(ToolRegistrationError) as info:
        registry.register(_workflow_tool(config={"version": "9.9"}))
    assert info.value.field == "execution_config.version" and "'9.9'" in str(info.value)


def test_an_agent_id_without_a_file_is_refused_naming_the_field_and_value(tmp_path):
    registry = _registry(None, AgentStore(tmp_path / "agents"))
    with pytest.raises(ToolRegistrationError) as info:
        registry.register({"tool_id": "ghost", "name": "Ghost", "tool_type": "agent",
                           "execution_config": {"agent_id": "agt_ghost"}})  # fmt: skip
    assert info.value.field == "execution_config.agent_id" and "'agt_ghost'" in str(info.value)
    assert registry.resolve("ghost") is None


def test_an_unknown_permission_in_an_agent_is_refused_naming_it(tmp_path):
    registry = _registry(*_stores(tmp_path, _research(permissions=["net:everything"])))
    with pytest.raises(ToolRegistrationError) as info:
        registry.register(_workflow_tool())
    assert info.value.field == "permissions" and "permissions[0] 'net:everything'" in str(info.value)


async def test_without_a_workflow_store_the_call_says_how_to_configure_one(tmp_path):
    registry = _registry(None, None)
    registry.register(_workflow_tool())
    executor, _ = make_executor(registry)
    result = await executor.invoke("research", {"user_input": "x"})
    assert not result.success and "workflows=WorkflowStore(" in result.error
    await executor.aclose()


async def test_a_workflow_removed_after_registration_fails_the_call_naming_it(tmp_path):
    workflows, agents = _stores(tmp_path, _research())
    registry = _registry(workflows, agents)
    registry.register(_workflow_tool())
    workflows.path_of("wf_research", "draft").unlink()
    executor, _ = make_executor(registry)
    result = await executor.invoke("research", {"user_input": "x"})
    assert not result.success and "'wf_research'" in result.error
    assert "execution_config.workflow_id" in result.error
    await executor.aclose()


# -- deadlines, agents, live progress ------------------------------------------------------------------


async def test_the_callers_deadline_passes_down_and_stops_the_inner_call(tmp_path):
    import asyncio
    import threading

    from tests.workflow_bridge import _compiler_tools

    _compiler_tools.reset()
    registry = _registry(
        *_stores(tmp_path, _research(tools=["Meet A"]))
    )  # waits for a partner that never comes
    registry.register(_workflow_tool())
    executor, log = make_executor(registry)
    inner_done = threading.Event()
    executor.add_sink(
        lambda e: inner_done.set() if e.tool_id == "tool_meet_a" and e.type != "tool.invoked" else None
    )
    try:
        _compiler_tools.STARTED["b"].set()  # the partner is there: the first call compiles, imports, meets
        assert (await executor.invoke("research", {"user_input": "x"})).success
        _compiler_tools.reset()
        log.events.clear()
        inner_done.clear()
        result = await executor.invoke("research", {"user_input": "x"}, ToolContext(timeout_ms=500))
        assert not result.success and result.error_type == "timeout"
        # the inner call had the time left of the outer call, not its own 30 s: it ends well before the
        # partner's 20 s wait would
        assert await asyncio.to_thread(inner_done.wait, 15)
        ended = [e for e in log.events if e.tool_id == "tool_meet_a" and e.type != "tool.invoked"][0]
        assert ended.error_type == "timeout"
    finally:
        _compiler_tools.STARTED["b"].set()  # release the worker thread
    await executor.aclose()


async def test_an_agents_permissions_narrow_an_agent_tools_calls(tmp_path):
    agents = AgentStore(tmp_path / "agents")
    agents.save(agent("agt_reader", tools=["Echo", "Score"], permissions=["fs:read"]))
    registry = _registry(None, agents)
    registry.register({**tool_definitions()[1], "permissions": ["net:outbound"]})
    registry.register({"tool_id": "reader", "name": "Reader", "tool_type": "agent",
                       "execution_config": {"agent_id": "agt_reader"}})  # fmt: skip
    assert registry.resolve("reader").permissions == []  # what it needs, within what the agent grants
    executor, _ = make_executor(registry)
    result = await executor.invoke("reader", {"task": "t"})
    assert result.success, result.error
    assert {c["tool_id"]: c["status"] for c in result.metadata["tool_calls"]} == {
        "tool_echo": "completed",
        "tool_score": "failed",
    }
    await executor.aclose()


async def test_an_agent_removed_after_registration_fails_the_call_naming_it(tmp_path):
    agents = AgentStore(tmp_path / "agents")
    path = agents.save(agent("agt_gone", tools=["Echo"]))
    registry = _registry(None, agents)
    registry.register({"tool_id": "gone", "name": "Gone", "tool_type": "agent",
                       "execution_config": {"agent_id": "agt_gone"}})  # fmt: skip
    path.unlink()
    executor, _ = make_executor(registry)
    result = await executor.invoke("gone", {"task": "t"})
    assert not result.success and "execution_config.agent_id" in result.error and "'agt_gone'" in result.error
    await executor.aclose()


async def test_an_agent_naming_an_unknown_tool_fails_the_call_naming_both(tmp_path):
    agents = AgentStore(tmp_path / "agents")
    agents.save(agent("agt_lost", tools=["No Such Tool"]))
    registry = _registry(None, agents)
    registry.register({"tool_id": "lost", "name": "Lost", "tool_type": "agent",
                       "execution_config": {"agent_id": "agt_lost"}})  # fmt: skip
    executor, _ = make_executor(registry)
    result = await executor.invoke("lost", {"task": "t"})
    assert not result.success and "'No Such Tool'" in result.error and "agt_lost" in result.error
    await executor.aclose()


async def test_an_agent_tool_without_an_agent_store_says_how_to_configure_one(tmp_path):
    registry = _registry(None, None)
    registry.register({"tool_id": "x", "name": "X", "tool_type": "agent",
                       "execution_config": {"agent_id": "agt_x"}})  # fmt: skip
    executor, _ = make_executor(registry)
    result = await executor.invoke("x", {"task": "t"})
    assert not result.success and "agents=AgentStore(" in result.error
    await executor.aclose()


def test_a_parent_runs_live_progress_shows_the_sub_workflows_tool_calls(tmp_path):
    from workflow_bridge.runner import run_workflow

    outer_agent = agent("agt_lead", name="Lead", tools=["Research"])
    outer, outer_agents = workflow([outer_agent], [], workflow_id="wf_outer")
    registry = _registry(*_stores(tmp_path, _research(), (outer, outer_agents)))
    registry.register(_workflow_tool())
    executor, _ = make_executor(registry)
    events: list[dict] = []
    run_workflow({"workflow": outer, "agents": outer_agents}, registry=registry, executor=executor,
                 user_input="nickel", run_id="run_live", on_event=events.append)  # fmt: skip
    done = [(e["tool_id"], e["run_id"].split("/")[0]) for e in events if e["type"] == "tool.completed"]
    assert done == [("tool_echo", "run_live"), ("research", "run_live")]
    nested = [e for e in events if e["type"] == "tool.completed" and e["tool_id"] == "tool_echo"][0]
    assert nested["run_id"].startswith("run_live/research/")
    executor.close()


def test_concurrent_sync_callers_of_nested_workflow_tools_all_finish(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    outer_agent = agent("agt_lead", name="Lead", tools=["Research"])
    registry = _registry(*_stores(tmp_path, _research(), workflow([outer_agent], [], workflow_id="wf_outer")))
    registry.register(_workflow_tool())
    registry.register(_workflow_tool("outer", "wf_outer", name="Outer"))
    executor, _ = make_executor(registry)
    # each call holds a thread until its sub-workflow's call, which needs a thread too, returns: more
    # callers than a shared pool has workers must not deadlock it
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda i: executor.invoke_sync("outer", {"user_input": f"q{i}"}), range(8)))
    assert [r.success for r in results] == [True] * 8, [r.error for r in results if not r.success]
    assert all(r.metadata["tool_calls"][0]["status"] == "completed" for r in results)
    assert len({r.metadata["run_id"] for r in results}) == 8
    executor.close()


def test_a_workflow_whose_agent_has_no_file_is_refused_and_nothing_is_stored(tmp_path):
    workflows, agents = _stores(tmp_path, _research())
    (agents.root / "agt_wf_research_researcher.json").unlink()
    registry = ToolRegistry(
        storage_dir=tmp_path / "tools", allowed_modules=[MODULE], workflows=workflows, agents=agents
    )
    with pytest.raises(ToolRegistrationError) as info:
        registry.register(_workflow_tool())
    assert info.value.field == "execution_config.workflow_id"
    assert "agents[1]" in str(info.value) and "'agt_wf_research_researcher'" in str(info.value)
    assert registry.resolve("research") is None
    assert not list((tmp_path / "tools").glob("*research*"))


async def test_an_api_node_in_a_workflow_tool_runs_with_its_agents_grant(tmp_path):
    def api_workflow(**fields: Any):
        call = agent("agt_call", "API", metadata={"api_config": {"method": "GET", "url": "https://x.example"}},
                     **fields)  # fmt: skip
        return workflow([call], [], workflow_id="wf_api")

    http = {**tool_definitions()[-1], "permissions": ["net:outbound"]}
    for fields, expected in (({}, "completed"), ({"permissions": ["fs:read"]}, "failed")):
        root = tmp_path / str(len(fields))
        registry = _registry(*_stores(root, api_workflow(**fields)))
        registry.register(http)
        registry.register(_workflow_tool("api", "wf_api", name="API call"))
        executor, log = make_executor(registry)
        result = await executor.invoke(
            "api", {"user_input": "x"}, ToolContext(granted_permissions=list(ToolPermission))
        )
        assert result.success, result.error
        assert [(c["tool_id"], c["status"]) for c in result.metadata["tool_calls"]] == [
            ("tool_http_request", expected)
        ]
        inner = [e for e in log.events if e.tool_id == "tool_http_request" and e.type != "tool.invoked"][0]
        assert inner.run_id == result.metadata["run_id"]
        await executor.aclose()


def test_an_agents_permissions_list_holds_in_a_plain_workflow_run_too():
    from tests.workflow_bridge._compiler_support import make_registry
    from workflow_bridge.runner import run_workflow

    registry = make_registry()
    registry.register({**tool_definitions()[1], "permissions": ["net:outbound"]})
    executor, log = make_executor(registry)
    wf, agents = workflow([agent("agt_a", tools=["Echo", "Score"], permissions=[])], [])
    run_workflow({"workflow": wf, "agents": agents}, registry=registry, executor=executor, user_input="x")
    ended = {e.tool_id: (e.type, e.error_type) for e in log.events if e.type != "tool.invoked"}
    assert ended == {
        "tool_echo": ("tool.completed", None),
        "tool_score": ("tool.failed", "permission_denied"),
    }
    executor.close()
