"""CrewAI's private names that workflow_bridge.compat.crewai relies on still exist in the installed CrewAI."""

from __future__ import annotations

from importlib.metadata import version

from crewai import Crew
from crewai.tools.structured_tool import CrewStructuredTool

from workflow_bridge.compat import crewai as compat


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def test_the_installed_crewai_is_in_the_supported_range() -> None:
    assert compat.SUPPORTED == ">=1.10,<2"
    assert (1, 10) <= _release(version("crewai")) < (2, 0)


def test_the_private_names_are_still_crewais() -> None:
    assert callable(CrewStructuredTool._parse_args)
    assert "_original_tool" in CrewStructuredTool.__private_attributes__
    assert "_task_output_handler" in Crew.__private_attributes__


def _structured() -> CrewStructuredTool:
    class Parsing(compat.StructuredToolBase):
        def parse_arguments(self, raw_args: object) -> dict[str, object]:
            return {"seen": raw_args}

    def echo(**kwargs: object) -> object:
        return kwargs

    from pydantic import BaseModel

    class Args(BaseModel):
        seen: object = None

    return Parsing(name="echo", description="Echo.", args_schema=Args, func=echo)


def test_crewais_own_invoke_parses_through_the_public_override() -> None:
    assert _structured().invoke("raw text") == {"seen": "raw text"}


def test_the_original_tool_and_its_usage_count_follow_the_structured_tool() -> None:
    class Original:
        current_usage_count = 0

    structured, original = _structured(), Original()
    assert compat.original_tool(structured) is None
    compat.set_original_tool(structured, original)
    compat.count_use(structured)
    assert compat.original_tool(structured) is original
    assert structured.current_usage_count == 1 and original.current_usage_count == 1


def test_a_crews_task_output_log_is_replaced() -> None:
    from crewai import Agent, Task

    agent = Agent(role="r", goal="g", backstory="b", llm="gpt-4o-mini")
    crew = Crew(agents=[agent], tasks=[Task(description="d", expected_output="e", agent=agent)])
    marker = object()
    assert compat.replace_task_output_handler(crew, marker) is True
    assert crew._task_output_handler is marker
    assert compat.replace_task_output_handler(object(), marker) is False
