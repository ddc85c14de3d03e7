"""The same tool-call recovery for CrewAI agents: `RecoveringCrewLLM`, a CrewAI `BaseLLM` wrapping another.

CrewAI's public extension point for a model is `BaseLLM` (a custom LLM whose `call` returns text or, for
native function calling, a list of OpenAI-shaped tool calls that the agent executor runs). This wrapper
asks the wrapped model (CrewAI's `LLM` pointed at the local server, or any `BaseLLM`) with the agent's
tools, then:

- a call written as text (bare or fenced JSON) for one of the agent's tools becomes a real tool call;
- a call naming a tool the agent does not have goes back to the model with the closest names;
- a failed call (the tool's result says what to fix) answered with an explanation instead of a new call
  is sent back once, asking for the corrected call;
- with `max_calls_per_turn=1` (as `local_crew_llm` sets it), one call at a time: the first call of a
  reply not made before, so the model writes a dependent call after reading the first one's result; the
  calls put off are remembered by the id of the call made, and when the model answers right after its
  result instead, they are made as it planned them (it answers after their results);
- a reply running a tool inside a code block instead of calling it goes back, asking for the call;
- a call repeating the previous one with the same arguments is not made again: the model is asked,
  without tools, to answer from the result it has.

Argument validation failures come back to the model as the tool's result (the executor's message names
the field and what to fix), as with any CrewAI tool.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from crewai.llms.base_llm import BaseLLM
from pydantic import ConfigDict, PrivateAttr

from workflow_bridge.recovering_chat import BAD_ARGUMENTS, FAILURE_PREFIXES, LOOP_NUDGE
from workflow_bridge.tool_call_recovery import (
    call_key,
    code_instead_instruction,
    code_instead_of_call,
    correction_for,
    first_new_calls,
    recover_tool_calls,
    retry_instruction,
    tool_names_of,
    tool_schemas_of,
)

__all__ = ["RecoveringCrewLLM"]

Message = dict[str, Any]
PUT_OFF_KEPT = 256  # turns whose put-off calls are remembered (an agent reads its result at once)


def _as_call(raw: Any) -> tuple[str, str, Any] | None:
    """(id, name, arguments) of a tool call from CrewAI's model (OpenAI objects or dicts)."""
    if isinstance(raw, Mapping):
        inner = raw.get("function")
        function: Mapping[str, Any] = inner if isinstance(inner, Mapping) else raw
        call_id, name, arguments = raw.get("id"), function.get("name"), function.get("arguments")
    else:
        call_id, attributes = getattr(raw, "id", None), getattr(raw, "function", None)
        name, arguments = getattr(attributes, "name", None), getattr(attributes, "arguments", None)
    if not isinstance(name, str):
        return None
    return str(call_id or f"call_{uuid.uuid4().hex[:12]}"), name, arguments


def _parsed(arguments: Any) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments as a dict, None) or (None, why they are not a JSON object)."""
    if isinstance(arguments, dict):
        return arguments, None
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}, None
    try:
        value = json.loads(arguments) if isinstance(arguments, str) else arguments
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    return (value, None) if isinstance(value, dict) else (None, f"a {type(value).__name__}, not an object")


def _openai_call(call_id: str, name: str, arguments: dict[str, Any]) -> Message:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def _previous_calls(messages: list[Message]) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []
    for message in messages:
        if message.get("role") != "assistant":
            continue
        for raw in message.get("tool_calls") or []:
            found = _as_call(raw)
            if found is not None:
                calls.append((found[1], _parsed(found[2])[0]))
    return calls


def _failed_call(conversation: list[Message]) -> tuple[str, Any, str] | None:
    """(tool name, arguments, error text) when the conversation ends with a failed tool call."""
    last = conversation[-1] if conversation else {}
    text = str(last.get("content") or "")
    if last.get("role") != "tool" or not text.startswith(FAILURE_PREFIXES):
        return None
    for message in reversed(conversation):
        for raw in message.get("tool_calls") or [] if message.get("role") == "assistant" else []:
            found = _as_call(raw)
            if found is not None and found[0] == last.get("tool_call_id"):
                return found[1], _parsed(found[2])[0] or {}, text[:1000]
    return None


class RecoveringCrewLLM(BaseLLM):
    """A CrewAI model wrapper recovering text tool calls, correcting wrong tool names and stopping loops.

    Args:
        llm: the model that answers (CrewAI's `LLM`, or any `BaseLLM`).
        max_corrections: how many times one turn may be sent back to the model with a correction.
        max_repeats: identical calls allowed in a row (1: a call repeating the previous one is stopped).
        max_calls_per_turn: how many of one reply's tool calls are made (None: all; 1: one at a time).
        on_tool_calls: called with each turn's tool calls (`{"name", "args"}`), as they are decided.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: Any
    max_corrections: int = 2
    max_repeats: int = 1
    max_calls_per_turn: int | None = None
    on_tool_calls: Callable[[list[dict[str, Any]]], None] | None = None
    # id of a call made -> the calls of its turn put off (`max_calls_per_turn`), the newest PUT_OFF_KEPT
    _put_off: dict[str, list[tuple[str, Any]]] = PrivateAttr(default_factory=dict)

    def __init__(self, llm: Any, **data: Any) -> None:
        data.setdefault("model", str(getattr(llm, "model", "wrapped")))
        # the wrapped model's server, for messages (`describe_llm`) and reachability checks (`check_llm`)
        base = getattr(llm, "base_url", None) or getattr(llm, "api_base", None)
        if isinstance(base, str) and base:
            data.setdefault("base_url", base)
        super().__init__(llm=llm, **data)

    def supports_function_calling(self) -> bool:
        return True

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        size = getattr(self.llm, "get_context_window_size", None)
        return int(size()) if callable(size) else 8192

    def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
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
        conversation: list[Message] = (
            [{"role": "user", "content": messages}] if isinstance(messages, str) else list(messages)
        )
        options = {"callbacks": callbacks, "from_task": from_task, "from_agent": from_agent}

        def ask(with_tools: bool) -> Any:
            chosen = tools if with_tools else None
            return self.llm.call(conversation, tools=chosen, available_functions=None, **options)

        reply = ask(True)
        for _ in range(self.max_corrections):
            answer, feedback, with_tools = self._decide(conversation, reply, tools or [])
            if feedback is None:
                return self._announce(answer)
            conversation = [*conversation, *feedback]
            reply = ask(with_tools)
            if not with_tools:
                return reply if isinstance(reply, str) else str(reply)
        answer, feedback, _ = self._decide(conversation, reply, tools or [])
        return self._announce(answer) if feedback is None else (reply if isinstance(reply, str) else "")

    async def acall(  # type: ignore[override]
        self, messages: Any, tools: Any = None, callbacks: Any = None, **kwargs: Any
    ) -> Any:
        return self.call(messages, tools, callbacks, **kwargs)

    def _announce(self, answer: Any) -> Any:
        if isinstance(answer, list) and self.on_tool_calls is not None:
            shown = [
                {"name": c["function"]["name"], "args": json.loads(c["function"]["arguments"])}
                for c in answer
            ]
            self.on_tool_calls(shown)
        return answer

    def _decide(
        self, conversation: list[Message], reply: Any, tools: list[dict[str, Any]]
    ) -> tuple[Any, list[Message] | None, bool]:
        """(the answer to return, None, _) or (_, the messages to add before asking again, with tools?)."""
        known = tool_names_of(tools)
        if isinstance(reply, str):
            if not known:
                return reply, None, True
            recovery = recover_tool_calls(reply, known)
            if recovery.unknown:
                feedback = correction_for(recovery.unknown, known)
                return (
                    None,
                    [{"role": "assistant", "content": reply}, {"role": "user", "content": feedback}],
                    True,
                )
            if not recovery.calls:
                answered = self._answer(conversation, reply, tools)
                if not isinstance(answered, list):
                    return answered
                calls = answered  # the calls the model had put off, made instead of its early answer
            else:
                calls = [(f"call_{uuid.uuid4().hex[:12]}", c.name, c.arguments) for c in recovery.calls]
        elif isinstance(reply, list):
            found = [_as_call(raw) for raw in reply]
            calls = [c for c in found if c is not None]
        else:
            return reply, None, True
        shown = "\n".join(json.dumps({"name": n, "arguments": a}, default=str) for _, n, a in calls)
        unknown = [name for _, name, _ in calls if name not in known]
        if unknown:
            feedback = correction_for(unknown, known)
            return (
                None,
                [{"role": "assistant", "content": shown}, {"role": "user", "content": feedback}],
                True,
            )
        parsed = []
        for call_id, name, arguments in calls:
            args, error = _parsed(arguments)
            if args is None:
                text = BAD_ARGUMENTS.format(name=name, error=error)
                return (
                    None,
                    [{"role": "assistant", "content": shown}, {"role": "user", "content": text}],
                    True,
                )
            parsed.append((call_id, name, args))
        if self.max_calls_per_turn is not None and len(parsed) > self.max_calls_per_turn:
            made = _previous_calls(conversation)
            chosen = first_new_calls([(n, a) for _, n, a in parsed], made, self.max_calls_per_turn)
            before = {call_key(name, args) for name, args in made}
            later = [
                (n, a)
                for i, (_, n, a) in enumerate(parsed)
                if i not in chosen and call_key(n, a) not in before
            ]
            parsed = [parsed[i] for i in chosen]
            if later:
                self._put_off[parsed[-1][0]] = later
                while len(self._put_off) > PUT_OFF_KEPT:
                    self._put_off.pop(next(iter(self._put_off)))
        if self._repeats(conversation, parsed):
            nudge = LOOP_NUDGE.format(name=parsed[0][1])
            return None, [{"role": "user", "content": nudge}], False
        return [_openai_call(*call) for call in parsed], None, True

    def _answer(
        self, conversation: list[Message], reply: str, tools: list[dict[str, Any]]
    ) -> tuple[Any, list[Message] | None, bool] | list[tuple[str, str, Any]]:
        """What a text reply without calls leads to (as `_decide` answers), or the calls of the model's
        plan it put off (made now, as planned: it answers after their results)."""
        failure = _failed_call(conversation)
        in_code = code_instead_of_call(reply, tool_names_of(tools))
        if failure is not None:
            nudge = retry_instruction(*failure, tool_schemas_of(tools))
        elif in_code is not None:
            nudge = code_instead_instruction(in_code, tool_schemas_of(tools))
        else:
            put_off = self._put_off_before(conversation)
            if put_off:
                return [(f"call_{uuid.uuid4().hex[:12]}", name, args) for name, args in put_off]
            return reply, None, True
        return None, [{"role": "assistant", "content": reply}, {"role": "user", "content": nudge}], True

    def _put_off_before(self, conversation: list[Message]) -> list[tuple[str, Any]]:
        """The calls put off by the turn whose result ends `conversation` (each shown once), or []."""
        last = conversation[-1] if conversation else {}
        if last.get("role") != "tool":
            return []
        return self._put_off.pop(str(last.get("tool_call_id")), [])

    def _repeats(self, conversation: list[Message], calls: list[tuple[str, str, dict[str, Any]]]) -> bool:
        previous = _previous_calls(conversation)[-self.max_repeats :]
        if len(previous) < self.max_repeats:
            return False
        keys = {call_key(name, args) for name, args in previous}
        return len(keys) == 1 and all(call_key(name, args) in keys for _, name, args in calls)
