"""Canvas Code tool entries with code: `main` becomes a `code` tool run in the real code sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from echo_tools.errors import ToolNotFoundError, ToolRegistrationError
from echo_tools.executor import ToolExecutor
from echo_tools.models import ToolContext
from echo_tools.registry import ToolRegistry
from tests.workflow_bridge._compiler_support import MODULE, tool_definitions
from tests.workflow_bridge._mapper_support import chain, node
from workflow_bridge.agent_factory import AgentFactory
from workflow_bridge.node_mapper import NodeMapper

REPEAT = '''
def main(text: str, times: int = 2, sep: "str | None" = None) -> dict:
    """Repeat a text.

    Args:
        text: what to repeat
        times: how often
    """
    print("repeating", times)
    return {"out": (sep or "").join([text] * times)}
'''
KWARGS = '''
def main(**kwargs):
    """Count the words of each text.

    Args:
        title: the title
        body: the body text
    """
    return {key: len(str(value).split()) for key, value in sorted(kwargs.items())}
'''


def _registry(tmp_path: Path) -> ToolRegistry:
    registry = ToolRegistry(storage_dir=tmp_path / "tools", allowed_modules=[MODULE])
    for definition in tool_definitions():
        registry.register(definition)
    return registry


def _entry(code: str, **config: Any) -> dict[str, Any]:
    return {"id": 5, "name": "Repeater", "type": "code", "enabled": True,
            "config": {"language": "python", "code": code, **config}}  # fmt: skip


def _map(registry: ToolRegistry, *entries: dict[str, Any], prompt: str = "") -> Any:
    return NodeMapper(registry).map_canvas(
        chain(node("n1", "Agent", "Coder", tools=list(entries), prompt=prompt), workflow_id="wf_code")
    )


def _agent(mapped: Any) -> dict[str, Any]:
    (only,) = mapped.agents.values()
    return only  # type: ignore[no-any-return]


def test_a_code_entry_becomes_a_code_tool_whose_schema_is_mains_signature(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    mapped = _map(registry, _entry(REPEAT, timeout=5))

    assert mapped.ok, mapped.diagnostics
    (tool_id,) = _agent(mapped)["tools"]
    tool = registry.require(tool_id)
    assert tool_id.startswith("code_") and tool.tool_type.value == "code" and tool.name == "Repeater"
    assert tool.description == "Repeat a text."
    assert tool.execution_config == {"code": REPEAT, "timeout_s": 5}
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "text": {"type": "string", "description": "what to repeat"},
            "times": {"type": "integer", "default": 2, "description": "how often"},
            "sep": {"type": ["string", "null"], "default": None},
        },
        "required": ["text"],
        "additionalProperties": False,
    }
    assert [p.value for p in tool.permissions] == ["shell:execute"]
    binding = _agent(mapped)["tool_bindings"][0]
    assert binding["type"] == "code" and binding["name"] == "Repeater" and binding["config"]["code"] == REPEAT


def test_the_same_code_maps_to_the_same_tool_and_round_trips(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    mapper = NodeMapper(registry)
    first = _map(registry, _entry(REPEAT))
    again = mapper.map_canvas(mapper.to_canvas(first.workflow, first.agents))

    assert again.ok, again.diagnostics
    assert _agent(first)["tools"] == _agent(again)["tools"]
    assert len(registry.list_by_type("code")) == 1
    changed = _map(registry, _entry(REPEAT.replace("Repeat a text.", "Repeat it.")))
    assert _agent(changed)["tools"] != _agent(first)["tools"] and len(registry.list_by_type("code")) == 2


def test_a_bare_kwargs_main_binds_with_a_warning_saying_to_name_the_parameters(tmp_path: Path) -> None:
    mapped = _map(_registry(tmp_path), _entry("def main(**kwargs):\n    return kwargs\n"))
    assert mapped.ok and _agent(mapped)["tools"][0].startswith("code_")
    (warning,) = [d for d in mapped.diagnostics if d.level == "warning"]
    assert warning.field == "config.tools[0].config.code" and "names no parameter" in warning.message


def test_an_empty_code_entry_is_still_the_generic_code_executor(tmp_path: Path) -> None:
    mapped = _map(_registry(tmp_path), _entry(""))
    assert mapped.ok and _agent(mapped)["tools"] == ["builtin_code"]


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ({"code": "def main(x):\n    return (x\n"}, "code", "line 2"),
        ({"code": "def run(x):\n    return x\n"}, "code", "defines no top-level function 'main'"),
        ({"code": "main = lambda: 1\n"}, "code", "it defines no function"),
        ({"code": 123}, "code", "must be Python source defining main(...), got 123"),
        ({"code": "def main(x, /):\n    return x\n"}, "code", "parameter 'x' is positional-only"),
        ({"code": REPEAT, "language": "javascript"}, "language", "'javascript'"),
        ({"code": REPEAT, "timeout": 600}, "timeout", "got 600"),
        ({"code": REPEAT, "timeout": "soon"}, "timeout", "got 'soon'"),
    ],
)
def test_a_code_entry_that_cannot_run_is_an_error_naming_node_entry_and_value(
    tmp_path: Path, config: dict[str, Any], field: str, says: str
) -> None:
    registry = _registry(tmp_path)
    before = sorted(p.name for p in (tmp_path / "tools").iterdir())
    mapped = _map(registry, {"id": 5, "name": "Repeater", "type": "code", "config": config})

    (error,) = mapped.errors
    assert error.node_id == "n1" and error.field == f"config.tools[0].config.{field}"
    assert "'n1'" in error.message and "config.tools[0]" in error.message and says in error.message
    assert _agent(mapped)["tools"] == []
    assert registry.list_by_type("code") == []  # nothing stored changes
    assert sorted(p.name for p in (tmp_path / "tools").iterdir()) == before


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ({"code": "def main(:\n"}, "execution_config.code", "does not parse: line 1"),
        ({"code": "x = 1\n"}, "execution_config.code", "no top-level function 'main'"),
        ({"code": ""}, "execution_config.code", "must be Python source"),
        ({"code": REPEAT, "timeout_s": 0}, "execution_config.timeout_s", "got 0"),
        ({"code": REPEAT, "memory_mb": 4}, "execution_config.memory_mb", "got 4"),
        ({"code": REPEAT, "cmd": "ls"}, "execution_config.cmd", "is unknown"),
    ],
)
def test_registering_a_code_tool_that_cannot_run_names_the_field(
    tmp_path: Path, config: dict[str, Any], field: str, says: str
) -> None:
    registry = _registry(tmp_path)
    with pytest.raises(ToolRegistrationError) as info:
        registry.register({"tool_id": "c", "name": "C", "tool_type": "code", "execution_config": config})
    assert info.value.field == field and says in str(info.value)
    assert registry.get("c") is None and not (tmp_path / "tools" / "c.json").exists()


async def test_a_code_tool_always_needs_shell_execute_whatever_its_definition_says(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    registry.register({"tool_id": "c", "name": "C", "tool_type": "code", "permissions": [],
                       "execution_config": {"code": "def main():\n    return 1\n"}})  # fmt: skip
    assert [p.value for p in registry.require("c").permissions] == ["shell:execute"]
    executor = ToolExecutor(registry)
    refused = await executor.invoke("c", {}, ToolContext(granted_permissions=[]))
    assert (
        not refused.success and refused.error_type == "permission_denied" and "shell:execute" in refused.error
    )
    await executor.aclose()


@pytest.mark.slow
async def test_a_code_tool_runs_main_in_the_sandbox_with_the_arguments(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    (tool_id,) = _agent(_map(registry, _entry(REPEAT)))["tools"]
    executor = ToolExecutor(registry)

    result = await executor.invoke(tool_id, {"text": "ab", "times": 3, "sep": "-"})
    assert result.success, result.error
    assert result.output == {"result": {"out": "ab-ab-ab"}, "stdout": "repeating 3\n"}
    registry.register({"tool_id": "later", "name": "Later", "tool_type": "code", "execution_config": {
        "code": "import asyncio\nasync def main(x: int):\n    await asyncio.sleep(0)\n    return {1, x}\n"}})  # fmt: skip
    awaited = await executor.invoke("later", {"x": 2})
    assert awaited.success and awaited.output["result"] == "{1, 2}"  # awaited; not JSON: its repr
    refused = await executor.invoke(tool_id, {"text": "ab", "loops": 3})
    assert not refused.success and refused.error_type == "validation" and "loops" in refused.error
    await executor.aclose()


@pytest.mark.slow
async def test_a_failing_main_names_the_line_and_a_slow_one_stops_at_its_timeout(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    failing = "def main(n: int):\n    values = [1, 2]\n    return values[n]\n"
    slow = "def main():\n    while True:\n        pass\n"
    (fail_id,) = _agent(_map(registry, _entry(failing)))["tools"]
    (slow_id,) = _agent(_map(registry, {**_entry(slow, timeout=1), "name": "Spin"}))["tools"]
    executor = ToolExecutor(registry)

    failed = await executor.invoke(fail_id, {"n": 5})
    assert not failed.success and "IndexError" in failed.error and 'tool_code.py", line 3' in failed.error
    stopped = await executor.invoke(slow_id, {})
    assert not stopped.success and stopped.error_type == "timeout" and "(1 s)" in stopped.error
    await executor.aclose()


@pytest.mark.slow
def test_an_agent_calls_its_code_tool_with_arguments_from_the_task(tmp_path: Path) -> None:
    """The person story: a Code tool on an agent whose main(**kwargs) is the tool, run by the rehearsal
    model with arguments from the task, through a real compiled LangGraph graph and a real CrewAI agent."""
    from workflow_bridge.runner import run_workflow

    registry = _registry(tmp_path)
    executor = ToolExecutor(registry)
    canvas = chain(
        node("n1", "Agent", "Counter", tools=[_entry(KWARGS)], model={"modelName": "rehearsal"}),
        workflow_id="wf_count",
    )
    events: list[dict[str, Any]] = []
    request = json.dumps({"title": "tools made of tools", "body": "a b c d"})
    state = run_workflow(canvas, registry=registry, executor=executor, user_input=f"Count these: {request}",
                         on_event=events.append)  # fmt: skip

    done = [e for e in events if e["type"] == "tool.completed"]
    assert [e["tool_id"][:5] for e in done] == ["code_"]
    assert '"title": 4' in state["crew_result"] and '"body": 4' in state["crew_result"]
    executor.close()


def test_an_agents_builtin_code_with_code_binds_its_code_tool(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    factory = AgentFactory(registry, ToolExecutor(registry))
    stored = {"agent_id": "agt_c", "name": "Coder", "tools": ["builtin_code"],
              "tool_bindings": [{"tool_id": "builtin_code", "name": "Repeater", "config": {"code": REPEAT}}]}  # fmt: skip
    ((tool, _),) = factory.resolve_tools(stored)
    assert tool.tool_type.value == "code" and tool.execution_config["code"] == REPEAT

    stored["tool_bindings"][0]["config"] = {"code": "def main(:"}  # type: ignore[index]
    with pytest.raises(ToolNotFoundError) as info:
        factory.resolve_tools(stored)
    assert "'Coder'" in str(info.value) and "does not parse: line 1" in str(info.value)
    factory.executor.close()


@pytest.mark.slow
def test_a_hosts_own_agenttools_package_never_runs_a_code_tool(tmp_path: Path) -> None:
    """EchoAI has its own `AgentTools`: a code tool must not import that package's sandbox; the shipped
    one runs instead (the name `AgentTools` is claimed for the shipped folder before anything imports it)."""
    import subprocess
    import sys

    fake = tmp_path / "host" / "AgentTools" / "code_executor"
    fake.mkdir(parents=True)
    for folder in (fake.parent, fake):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    marker = tmp_path / "host-code-ran"
    (fake / "sandbox.py").write_text(f"open({str(marker)!r}, 'w').close()\n", encoding="utf-8")
    script = (
        "from echo_tools import ToolExecutor, ToolRegistry\n"
        "r = ToolRegistry()\n"
        "r.register({'tool_id': 'c', 'name': 'C', 'tool_type': 'code',"
        " 'execution_config': {'code': 'def main():\\n    return 1\\n'}})\n"
        "res = ToolExecutor(r).invoke_sync('c', {})\n"
        "print(res.success, res.error)\n"
    )
    root = Path(__file__).resolve().parents[2]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path / 'host'}:{root}"}
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )

    assert done.stdout == "True None\n", (done.stdout, done.stderr)  # the shipped sandbox ran main()
    assert not marker.exists()  # the host's package was never imported
