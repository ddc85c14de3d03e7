"""The offline rehearsal model: a deterministic CrewAI `BaseLLM` that exercises an agent's tools for real.

It speaks CrewAI's native function-calling protocol: on an agent's first turn it asks for every bound tool
once, with arguments built from the task text (a JSON object whose keys match the tool's schema, a fenced
code block for code parameters, the user's request for free-text parameters, schema defaults, first enum
values); on the next turn it answers with what the tools returned. It never calls a language model.
"""

from __future__ import annotations

import json
import re
from typing import Any

from crewai.llms.base_llm import BaseLLM
from pydantic import PrivateAttr

from workflow_bridge.text_arguments import build_arguments, sections, user_request_in

REHEARSAL_MODEL = "echo-rehearsal"
REHEARSAL_NOTICE = (
    "No LLM is configured (set ECHO_LLM, pass --llm, or give the agents an llm with an API key in the "
    "environment): running the offline REHEARSAL model. It is deterministic and calls no language model: "
    "each agent calls each of its tools once with arguments taken from the task, then reports what the "
    "tools returned. The tools run for real."
)

# CrewAI wraps the task description: "Current Task: <description>\n\nThis is the expected criteria ..."
_CREW_PREFIX = re.compile(r"^\s*Current Task:[ \t]*")
_CREW_SUFFIX = "\n\nThis is the expected criteria for your final answer"
_COWORKERS = re.compile(r"following coworkers:\s*(.+)")
_MAX_ANSWER_CHARS = 4000


class RehearsalLLM(BaseLLM):
    """Deterministic offline model: calls each bound tool once, then answers with the tools' results.

    `calls` records the messages of every call (tests read what an agent was asked).
    """

    model: str = REHEARSAL_MODEL
    is_rehearsal: bool = True
    reason: str = REHEARSAL_NOTICE

    _calls: list[list[dict[str, Any]]] = PrivateAttr(default_factory=list)

    def __init__(self, **data: Any) -> None:
        data.setdefault("model", REHEARSAL_MODEL)
        super().__init__(**data)

    @property
    def calls(self) -> list[list[dict[str, Any]]]:
        return self._calls

    def supports_function_calling(self) -> bool:
        return True

    def get_context_window_size(self) -> int:
        return 128_000

    def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
        # The base class logs a warning on every estimate; the rehearsal has no tokenizer to offer anyway.
        text = messages if isinstance(messages, str) else json.dumps(messages, default=str)
        return (len(text) + 3) // 4

    def call(
        self,
        messages: Any,
        tools: list[dict[str, Any]] | None = None,
        callbacks: list[Any] | None = None,
        available_functions: dict[str, Any] | None = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        history = [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        self._calls.append(history)
        task_text = _task_text(history)
        turn = _current_turn(history)
        if tools and not any(m.get("role") == "tool" for m in turn):
            calls = _tool_calls(tools, task_text, len(self._calls))
            if calls:
                return calls
        role = getattr(from_agent, "role", None) or "agent"
        answer = _answer(role, task_text, [m for m in turn if m.get("role") == "tool"])
        # Without native tools CrewAI parses ReAct text, which needs the "Final Answer:" marker.
        return answer if tools else f"Thought: I can answer now.\nFinal Answer: {answer}"

    async def acall(  # type: ignore[override]
        self, messages: Any, tools: Any = None, callbacks: Any = None, **kwargs: Any
    ) -> Any:
        return self.call(messages, tools, callbacks, **kwargs)


def _task_text(history: list[dict[str, Any]]) -> str:
    users = [m for m in history if m.get("role") == "user"]
    content = users[-1].get("content") if users else ""
    if isinstance(content, list):  # multimodal parts
        content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    text = _CREW_PREFIX.sub("", str(content or ""), count=1)
    cut = text.find(_CREW_SUFFIX)
    return text[:cut] if cut != -1 else text


def _current_turn(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Only tool results after the latest user message count: a delegated task starts a fresh turn.
    last_user = max((i for i, m in enumerate(history) if m.get("role") == "user"), default=-1)
    return history[last_user + 1 :]


def _tool_calls(tools: list[dict[str, Any]], task_text: str, call_number: int) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    for index, tool in enumerate(tools):
        function = tool.get("function") or tool
        name = function.get("name")
        if not name or name.startswith("ask_question"):
            continue  # CrewAI's "ask a coworker" tool: delegation below covers the workers
        if name.startswith("delegate_work"):
            calls.extend(_delegations(function, task_text, call_number, index))
            continue
        arguments = build_arguments(function.get("parameters") or {}, task_text)
        calls.append(_call(f"call_{call_number}_{index}", name, arguments))
    return calls


def _delegations(function: dict[str, Any], task_text: str, call_number: int, index: int) -> list[dict]:
    # The hierarchical manager: hand the task to each coworker once, so every worker and its tools run.
    match = _COWORKERS.search(function.get("description") or "")
    coworkers = [c.strip() for c in match.group(1).split(",")] if match else []
    request = user_request_in(task_text)
    return [
        _call(
            f"call_{call_number}_{index}_{n}",
            function["name"],
            {"task": f"ORIGINAL USER REQUEST:\n{request}", "context": task_text, "coworker": coworker},
        )
        for n, coworker in enumerate(c for c in coworkers if c)
    ]


def _call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, default=str)},
    }


def _answer(role: str, task_text: str, tool_messages: list[dict[str, Any]]) -> str:
    lines = [f"[rehearsal] {role}:"]
    if tool_messages:
        for message in tool_messages:
            content = str(message.get("content", ""))
            lines.append(f"- {message.get('name', 'tool')} returned: {content}")
    else:
        found = sections(task_text)
        lines.append(f"handled the request: {user_request_in(task_text)}")
        previous = found.get("PREVIOUS AGENT OUTPUT")
        if previous:
            lines.append(f"previous agent output: {previous}")
    text = "\n".join(lines)
    return text if len(text) <= _MAX_ANSWER_CHARS else text[: _MAX_ANSWER_CHARS - 3] + "..."
