"""`ToolRegistry.add`: in-process tools made of functions, closures, methods and framework tool objects."""

from __future__ import annotations

import json
import warnings

import pytest

from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry, tool
from echo_tools.errors import ToolNameConflictError, ToolReadOnlyError, ToolRegistrationError
from echo_tools.models import ToolSource


def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: the first factor.
        b: the second factor.
    """
    return a * b


@tool(side_effect="pure")
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


def make_counter(start: int):
    count = {"value": start}

    def bump(by: int = 1) -> int:
        """Add to the counter and return it."""
        count["value"] += by
        return count["value"]

    return bump


class Greeter:
    def __init__(self, greeting: str) -> None:
        self.greeting = greeting

    def greet(self, who: str) -> str:
        """Greet someone."""
        return f"{self.greeting}, {who}"


@pytest.fixture
def stored(tmp_path):
    registry = ToolRegistry(storage_dir=tmp_path / "tools")
    log = MemoryEventLog()
    return registry, ToolExecutor(registry, event_sinks=[log]), log


def test_a_module_function_closure_method_and_tool_function_run_through_the_executor(stored):
    registry, executor, log = stored
    added = [
        registry.add(multiply),
        registry.add(make_counter(10)),
        registry.add(Greeter("Hello").greet),
        registry.add(shout),
    ]

    assert [t.tool_id for t in added] == ["tool_multiply", "tool_bump", "tool_greet", "tool_shout"]
    assert all(t.source == ToolSource.PYTHON and t.ephemeral for t in added)
    assert executor.invoke_sync("multiply", {"a": 3, "b": 4}).output == 12
    assert executor.invoke_sync("bump", {"by": 5}).output == 15
    assert executor.invoke_sync("bump", {}).output == 16
    assert executor.invoke_sync("greet", {"who": "Ada"}).output == "Hello, Ada"
    assert executor.invoke_sync("shout", {"text": "hi"}).output == "HI"
    assert registry.require("multiply").input_schema["properties"]["a"]["description"] == "the first factor."
    assert registry.require("shout").side_effect.value == "pure"
    completed = [e.tool_id for e in log.events if e.type == "tool.completed"]
    assert completed == ["tool_multiply", "tool_bump", "tool_bump", "tool_greet", "tool_shout"]


def test_input_is_validated_as_for_any_tool(stored):
    registry, executor, _ = stored
    registry.add(multiply)
    result = executor.invoke_sync("multiply", {"a": "three", "b": 4})
    assert result.error_type == "validation" and result.error_field == "input.a"


def test_added_tools_are_never_written_to_the_store_and_survive_a_reload(stored, tmp_path):
    registry, executor, _ = stored
    registry.add(multiply)
    registry.reload()

    assert registry.require("multiply").ephemeral
    assert not (tmp_path / "tools" / "tool_multiply.json").exists()
    index = (
        json.loads((tmp_path / "tools" / "tool_index.json").read_text())
        if (tmp_path / "tools" / "tool_index.json").exists()
        else {}
    )
    assert "tool_multiply" not in json.dumps(index)
    assert "ephemeral" in registry.require("multiply").tags
    assert ToolRegistry(storage_dir=tmp_path / "tools").resolve("multiply") is None  # another process


def test_no_allowed_modules_apply_to_added_tools(tmp_path):
    registry = ToolRegistry(storage_dir=tmp_path, allowed_modules=["AgentTools"])
    registry.add(multiply)  # tests.echo_tools.test_in_process is outside AgentTools
    assert ToolExecutor(registry).invoke_sync("multiply", {"a": 2, "b": 2}).output == 4


def test_a_lambda_needs_a_name_and_a_lambda_with_star_args_is_refused(stored):
    registry, executor, _ = stored
    registry.add(lambda x: x * 2, name="double")
    assert executor.invoke_sync("double", {"x": 4}).output == 8

    with pytest.raises(ToolRegistrationError, match=r"lambda without a name: pass name="):
        registry.add(lambda x: x)
    with pytest.raises(ToolRegistrationError, match=r"taking \*args.*it accepts a function or closure"):
        registry.add(lambda *args: args, name="spread")


def test_a_class_a_coroutine_object_and_a_number_are_refused_naming_what_was_given(stored):
    registry, _, _ = stored

    async def fetch(url: str) -> str:
        return url

    with pytest.raises(ToolRegistrationError, match=r"the class Greeter.*LangChain BaseTool instance"):
        registry.add(Greeter)
    with pytest.raises(ToolRegistrationError, match=r"a coroutine object: pass the async function itself"):
        registry.add(fetch("x"))
    with pytest.raises(ToolRegistrationError, match=r"got a int object \(42\)") as caught:
        registry.add(42)
    assert caught.value.field == "obj"
    assert len(registry) == 0


def test_an_async_function_is_awaited(stored):
    registry, executor, _ = stored

    async def fetch(url: str) -> str:
        """Pretend to fetch."""
        return f"got {url}"

    registry.add(fetch)
    assert executor.invoke_sync("fetch", {"url": "u"}).output == "got u"


def test_a_stored_tool_of_the_same_name_is_neither_replaced_nor_replacing(stored):
    registry, _, _ = stored
    registry.register(
        {"name": "multiply", "tool_type": "mcp", "execution_config": {"server": "s", "tool": "m"}}
    )
    with pytest.raises(ToolNameConflictError, match="stored tool"):
        registry.add(multiply)

    registry.add(multiply, name="times")
    with pytest.raises(ToolNameConflictError, match="in-process tool"):
        registry.register({"tool_id": "tool_times", "name": "times", "tool_type": "mcp",
                           "execution_config": {"server": "s", "tool": "t"}})  # fmt: skip


def test_over_http_nothing_ephemeral_can_be_created_replaced_or_deleted(stored):
    registry, _, _ = stored
    registry.add(multiply)
    api = {"tool_type": "api", "execution_config": {"url": "https://api.example.com/x"}}
    definition = {"name": "sneaky", "ephemeral": True, **api}
    with pytest.raises(ToolRegistrationError, match="registry.add") as caught:
        registry.register_remote(definition)
    assert caught.value.field == "ephemeral"
    with pytest.raises(ToolReadOnlyError):
        registry.register_remote({"tool_id": "tool_multiply", "name": "multiply", **api})
    with pytest.raises(ToolReadOnlyError):
        registry.delete_remote("tool_multiply")
    assert registry.require("multiply").ephemeral


def test_the_tool_def_of_an_added_tool_cannot_be_registered_into_the_store(stored):
    registry, _, _ = stored
    added = registry.add(multiply)
    registry.delete(added.tool_id)
    with pytest.raises(ToolRegistrationError, match="added with registry.add"):
        registry.register(added)


def test_langchain_and_crewai_tool_instances_run_through_the_executor(stored):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
        from crewai.tools import tool as crewai_tool
        from langchain_core.tools import StructuredTool

    registry, executor, log = stored
    suffix = "!"

    def exclaim(text: str) -> str:
        return text + suffix

    lc = StructuredTool.from_function(exclaim, name="exclaim", description="Add an exclamation mark.")

    @crewai_tool("Reverse")
    def reverse(text: str) -> str:
        """Reverse a text."""
        return text[::-1]

    registry.add(lc)
    registry.add(reverse)
    assert executor.invoke_sync("exclaim", {"text": "hi"}).output == "hi!"
    assert executor.invoke_sync("Reverse", {"text": "abc"}).output == "cba"
    assert registry.require("exclaim").tags[:2] == ["langchain", "ephemeral"]
    assert registry.require("Reverse").input_schema["required"] == ["text"]
    assert [e.type for e in log.events if e.type.startswith("tool.c")] == ["tool.completed"] * 2


async def test_the_http_api_runs_added_tools_but_cannot_create_replace_or_delete_them(stored):
    import httpx

    from echo_tools.api import create_app
    from echo_tools.settings import ApiSettings

    registry, executor, _ = stored
    registry.add(multiply)
    app = create_app(registry, executor, ApiSettings())
    api = {"tool_type": "api", "execution_config": {"url": "https://api.example.com/x"}}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        ran = await client.post("/tools/invoke/multiply", json={"a": 6, "b": 7})
        created = await client.post("/tools/register", json={"name": "sneaky", "ephemeral": True, **api})
        replaced = await client.post("/tools/register", json={"tool_id": "tool_multiply", "name": "m", **api})
        deleted = await client.delete("/tools/tool_multiply")
        listed = (await client.get("/tools/list")).json()
    await executor.aclose()

    assert ran.status_code == 200 and ran.json()["output"] == 42
    assert created.status_code == 422 and "registry.add" in created.json()["message"]
    assert replaced.status_code == 409 and deleted.status_code == 409
    (entry,) = [t for t in listed if t["tool_id"] == "tool_multiply"]
    assert "ephemeral" in entry["tags"] and "source:python" in entry["tags"]
    assert registry.require("multiply").ephemeral
