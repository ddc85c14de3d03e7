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

REHEARSAL_MODEL = "echo-rehearsal"
REHEARSAL_NOTICE = (
    "No LLM is configured (set ECHO_LLM, pass --llm, or give the agents an llm with an API key in the "
    "environment): running the offline REHEARSAL model. It is deterministic and calls no language model: "
    "each agent calls each of its tools once with arguments taken from the task, then reports what the "
    "tools returned. The tools run for real."
)

_SECTION = re.compile(r"^(?:Current Task:[ \t]*)?([A-Z][A-Z ()/_-]{2,}):[ \t]*$", re.M)
# CrewAI wraps the task description: "Current Task: <description>\n\nThis is the expected criteria ..."
_CREW_PREFIX = re.compile(r"^\s*Current Task:[ \t]*")
_CREW_SUFFIX = "\n\nThis is the expected criteria for your final answer"
_FENCE = re.compile(r"```[ \t]*([\w+-]*)[ \t]*\n(.*?)```", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_CODE_NAMES = {"code", "source", "source_code", "script", "snippet", "program"}
_COWORKERS = re.compile(r"following coworkers:\s*(.+)")
_MAX_OBJECT_SCANS = 200
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


def sections(text: str) -> dict[str, str]:
    """The `HEADER:` sections of a task text built by the adapter (`ORIGINAL USER REQUEST`, ...)."""
    found: dict[str, str] = {}
    matches = list(_SECTION.finditer(text))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        found.setdefault(match.group(1).strip(), text[match.end() : end].strip())
    return found


def user_request_in(text: str) -> str:
    """The user's request inside a task text (its ORIGINAL USER REQUEST section, else the whole text)."""
    found = sections(text)
    return found.get("ORIGINAL USER REQUEST") or found.get("CURRENT TASK") or text.strip()


def json_objects_in(text: str) -> list[dict[str, Any]]:
    """Every JSON object embedded in `text`, in order (bounded scan)."""
    decoder = json.JSONDecoder()
    objects: list[dict[str, Any]] = []
    i, scans = text.find("{"), 0
    while i != -1 and scans < _MAX_OBJECT_SCANS:
        scans += 1
        try:
            value, end = decoder.raw_decode(text, i)
        except ValueError:
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            objects.append(value)
        i = text.find("{", end)
    return objects


def code_block_in(text: str) -> str | None:
    """The body of the first fenced code block in `text`."""
    match = _FENCE.search(text)
    return match.group(2).strip("\n") if match else None


def _unwrap(prop: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    # CrewAI's strict schemas express optional fields as anyOf [T, null]
    for key in ("anyOf", "oneOf"):
        options = prop.get(key)
        if isinstance(options, list):
            real = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            nullable = len(real) < len(options)
            if len(real) == 1:
                merged = {**{k: v for k, v in prop.items() if k != key}, **real[0]}
                return merged, nullable
            return prop, nullable
    types = prop.get("type")
    if isinstance(types, list):
        real_types = [t for t in types if t != "null"]
        return {**prop, "type": real_types[0] if real_types else None}, len(real_types) < len(types)
    return prop, False


def build_arguments(schema: dict[str, Any], task_text: str) -> dict[str, Any]:
    """Arguments for one tool call, taken from the task text and the tool's JSON Schema."""
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    request = user_request_in(task_text)
    objects = [o for o in json_objects_in(task_text) if set(o) & set(props)]
    code = code_block_in(request) or code_block_in(task_text)
    args: dict[str, Any] = {}
    for name, raw in props.items():
        prop, nullable = _unwrap(raw if isinstance(raw, dict) else {})
        from_json = next((o[name] for o in objects if name in o), _MISSING)
        if from_json is not _MISSING:
            args[name] = from_json
        elif "default" in prop and prop["default"] is not None:
            args[name] = prop["default"]
        elif _is_code_param(name, prop) and code is not None:
            args[name] = code
        elif prop.get("enum"):
            args[name] = prop["enum"][0]
        elif nullable or name not in required:
            continue
        else:
            args[name] = _value_for(name, prop, request, code)
    return args


_MISSING = object()


def _is_code_param(name: str, prop: dict[str, Any]) -> bool:
    lowered = name.lower()
    # `test_code` and the like hold tests, not the code under test: the fenced block is the code itself
    if lowered.startswith("test"):
        return False
    return prop.get("type") in (None, "string") and (lowered in _CODE_NAMES or "code" in lowered)


def _value_for(name: str, prop: dict[str, Any], request: str, code: str | None) -> Any:
    kind = prop.get("type")
    if kind == "integer":
        return int(prop.get("minimum", 1))
    if kind == "number":
        return float(prop.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        items, _ = _unwrap(prop.get("items") or {})
        if items.get("type") in ("number", "integer"):
            numbers = [float(n) for n in _NUMBER.findall(_prose(request))]
            return [int(n) for n in numbers] if items.get("type") == "integer" else numbers
        return [request] if items.get("type") == "string" else []
    if kind == "object":
        return {}
    if _is_code_param(name, prop) and code is None:
        return request
    return request


def _prose(text: str) -> str:
    """`text` without its code blocks and JSON objects (numbers there are not the user's operands)."""
    text = _FENCE.sub(" ", text)
    for obj in json_objects_in(text):
        text = text.replace(json.dumps(obj), " ")
    return re.sub(r"\{[^{}]*\}", " ", text)


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
