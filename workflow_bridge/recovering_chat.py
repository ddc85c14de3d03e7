"""A LangChain chat model that makes a small model's tool calling dependable: `RecoveringChatModel`.

It wraps any chat model (LangChain's `ChatOpenAI` pointed at the local server, Ollama, a hosted model) and
goes wherever a chat model goes: `create_agent(RecoveringChatModel(model=...), tools=...)`, a graph node
of your own, `model.bind_tools(...)`. On each turn it

- turns a call the model wrote as text (bare or fenced JSON, `<tool_call>` tags) into a real tool call,
  only for the tools it was given (`tool_call_recovery.recover_tool_calls`);
- tells the model when it named a tool that does not exist or wrote arguments that are not JSON, with
  the closest real names ("did you mean"), and lets it try again (`max_corrections` times);
- when a tool call failed (a wrong name, arguments that failed validation: the tool result says what to
  fix) and the model answers with an explanation instead of a new call, sends it back once with the
  call to write (`tool_call_recovery.retry_instruction`: the closest tool name, or the tool's fields);
- makes calls one at a time when asked (`max_calls_per_turn=1`, as `local_chat_model` does): a small model
  writes a plan's dependent calls in one turn, guessing what the first returns; the first call not made
  before is made, the rest kept with the message (`additional_kwargs["deferred_tool_calls"]`); the model
  writes the next call from the first one's result, and when it answers at once instead, the calls it
  had put off are made as it planned them, and it answers after their results;
- sends back a reply that runs a tool in a code block (with an output the model imagines) instead of
  calling it, asking for the call (`tool_call_recovery.code_instead_of_call`);
- stops a loop: a call repeating the previous one with the same arguments is not made again; the model
  is asked to answer from the result it already has, without tools;
- keeps the answer on the result: when the model answers right after a successful call and its answer
  does not hold that call's short result (a small model offered tools may answer some other question),
  the same conversation is asked once more without tools, which small models answer from the result.

Validation errors of the arguments come back from the executor as the tool's error message (naming the
field and the closest field names), which the model reads on its next turn.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field

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

__all__ = ["RecoveringChatModel"]

FAILURE_PREFIXES = (
    "Error:",
    "Tool '",
    "Tool not found",
)  # how a failed call reads (LangGraph's ToolNode, echo-tools' executor)
LOOP_NUDGE = (
    "You already called {name} with these same arguments and its result is above. Do not call it "
    "again: answer the request now, in plain text, from the results you have."
)
DEFERRED = "deferred_tool_calls"  # where a call turn keeps the calls it put off (`max_calls_per_turn`)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")
GROUNDED_RESULT_CHARS = 200  # longer results are summarised, not quoted: no check for them
BAD_ARGUMENTS = (
    "Your call to {name!r} had arguments that are not a JSON object ({error}). Call it again with the "
    "arguments as one JSON object."
)


def _calls_so_far(messages: Sequence[BaseMessage]) -> list[tuple[str, Any]]:
    """(name, arguments) of every tool call in the conversation, oldest first."""
    calls: list[tuple[str, Any]] = []
    for message in messages:
        if isinstance(message, AIMessage):
            calls.extend((c["name"], c.get("args") or {}) for c in message.tool_calls)
    return calls


def _call_text(name: str, arguments: Any) -> str:
    return json.dumps({"name": name, "arguments": arguments}, default=str)


class RecoveringChatModel(BaseChatModel):
    """A chat model wrapper recovering text tool calls, correcting wrong tool names and stopping loops.

    Args:
        model: the chat model that answers (e.g. `ChatOpenAI(base_url=server.base_url, ...)`).
        max_corrections: how many times one turn may be sent back to the model with a correction.
        max_repeats: how many identical calls in a row are allowed (1: a call repeating the previous
            one with the same arguments is stopped).
        max_calls_per_turn: how many of one reply's tool calls are made (None: all): with 1, the first
            call not made before, and the model writes the next call after reading its result.
        on_tool_calls: called with each turn's tool calls (name and args), as they are decided (the
            demo prints them).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: BaseChatModel
    max_corrections: int = 2
    max_repeats: int = 1
    max_calls_per_turn: int | None = None
    on_tool_calls: Callable[[list[dict[str, Any]]], None] | None = None
    tools: list[dict[str, Any]] = Field(default_factory=list)
    tool_options: dict[str, Any] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return f"recovering-{self.model._llm_type}"

    @property
    def tool_names(self) -> list[str]:
        return tool_names_of(self.tools)

    def bind_tools(
        self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """A copy of this wrapper that offers `tools` to the model (LangChain tools, functions or dicts)."""
        options = dict(kwargs)
        if tool_choice is not None:
            options["tool_choice"] = tool_choice
        formatted = [convert_to_openai_tool(t) for t in tools]
        return self.model_copy(update={"tools": formatted, "tool_options": options})

    def _inner(self, with_tools: bool) -> Runnable[Any, Any]:
        if with_tools and self.tools:
            return self.model.bind_tools(self.tools, **self.tool_options)
        return self.model

    # -- one turn: ask, then correct at most `max_corrections` times -------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        conversation = list(messages)
        reply = self._inner(True).invoke(conversation, stop=stop, **kwargs)
        for _ in range(self.max_corrections):
            turn = self._decide(conversation, reply)
            if turn.message is not None:
                return self._result(turn.message)
            conversation = [*conversation, *turn.feedback]
            reply = self._inner(turn.with_tools).invoke(conversation, stop=stop, **kwargs)
            if not turn.with_tools:
                return self._result(_text_only(reply))
        return self._result(self._final(conversation, reply))

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        conversation = list(messages)
        reply = await self._inner(True).ainvoke(conversation, stop=stop, **kwargs)
        for _ in range(self.max_corrections):
            turn = self._decide(conversation, reply)
            if turn.message is not None:
                return self._result(turn.message)
            conversation = [*conversation, *turn.feedback]
            reply = await self._inner(turn.with_tools).ainvoke(conversation, stop=stop, **kwargs)
            if not turn.with_tools:
                return self._result(_text_only(reply))
        return self._result(self._final(conversation, reply))

    def _result(self, message: AIMessage) -> ChatResult:
        if message.tool_calls and self.on_tool_calls is not None:
            self.on_tool_calls([{"name": c["name"], "args": c["args"]} for c in message.tool_calls])
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _final(self, conversation: list[BaseMessage], reply: AIMessage) -> AIMessage:
        """The reply once the corrections ran out: a call the model finally got right, else its text."""
        turn = self._decide(conversation, reply)
        return turn.message if turn.message is not None else _text_only(reply)

    def _decide(self, conversation: list[BaseMessage], reply: AIMessage) -> _Turn:
        """The message to return, or the feedback to add before asking the model again."""
        known = self.tool_names
        calls: list[dict[str, Any]] = [dict(c) for c in reply.tool_calls]
        if reply.invalid_tool_calls:
            bad = reply.invalid_tool_calls[0]
            text = BAD_ARGUMENTS.format(name=bad.get("name"), error=bad.get("error") or "unreadable")
            return _Turn(
                feedback=[AIMessage(_call_text(str(bad.get("name")), bad.get("args"))), HumanMessage(text)]
            )
        if not calls and self.tools:
            recovery = recover_tool_calls(reply.content, known)
            if recovery.unknown:
                feedback = correction_for(recovery.unknown, known)
                return _Turn(feedback=[AIMessage(str(reply.content)), HumanMessage(feedback)])
            calls = [
                {
                    "name": c.name,
                    "args": c.arguments,
                    "id": f"call_{uuid.uuid4().hex[:12]}",
                    "type": "tool_call",
                }
                for c in recovery.calls
            ]
        if not calls:
            answered = self._answer(conversation, reply, known)
            if isinstance(answered, _Turn):
                return answered
            calls = answered  # the calls the model had put off, made instead of its early answer
        unknown = [c["name"] for c in calls if c["name"] not in known]
        if unknown:
            shown = "\n".join(_call_text(c["name"], c["args"]) for c in calls)
            return _Turn(feedback=[AIMessage(shown), HumanMessage(correction_for(unknown, known))])
        if self.max_calls_per_turn is not None and len(calls) > self.max_calls_per_turn:
            made = _calls_so_far(conversation)
            chosen = first_new_calls([(c["name"], c["args"]) for c in calls], made, self.max_calls_per_turn)
            before = {call_key(name, args) for name, args in made}
            later = [
                {"name": c["name"], "args": c["args"]}
                for i, c in enumerate(calls)
                if i not in chosen and call_key(c["name"], c["args"]) not in before
            ]
            calls = [calls[i] for i in chosen]
        else:
            later = []
        if self._repeats(conversation, calls):
            return _Turn(feedback=[HumanMessage(LOOP_NUDGE.format(name=calls[0]["name"]))], with_tools=False)
        kept = {DEFERRED: later} if later else {}
        message = AIMessage(content="", tool_calls=calls, id=reply.id, additional_kwargs=kept)  # type: ignore[arg-type]
        return _Turn(message=message)

    def _answer(
        self, conversation: list[BaseMessage], reply: AIMessage, known: list[str]
    ) -> _Turn | list[dict[str, Any]]:
        """What a reply without tool calls leads to: the answer, feedback for another try, or the calls
        of the model's plan it put off (made now, as planned: it answers after their results)."""
        failure = _failed_call(conversation)
        if failure is not None and self.tools:
            nudge = retry_instruction(*failure, tool_schemas_of(self.tools))
            return _Turn(feedback=[AIMessage(str(reply.content)), HumanMessage(nudge)])
        in_code = code_instead_of_call(reply.content, known) if self.tools else None
        if in_code is not None:
            nudge = code_instead_instruction(in_code, tool_schemas_of(self.tools))
            return _Turn(feedback=[AIMessage(str(reply.content)), HumanMessage(nudge)])
        deferred = _deferred_calls(conversation)
        if deferred:
            return [
                {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
                for name, args in deferred
            ]
        if _drops_the_result(conversation, str(reply.content)):
            return _Turn(with_tools=False)  # the same question again, answered without tools
        return _Turn(message=_text_only(reply))

    def _repeats(self, conversation: list[BaseMessage], calls: list[dict[str, Any]]) -> bool:
        """True when `calls` repeat, with the same arguments, the call made `max_repeats` times in a row."""
        previous = _calls_so_far(conversation)[-self.max_repeats :]
        if len(previous) < self.max_repeats:
            return False
        keys = {call_key(name, args) for name, args in previous}
        return len(keys) == 1 and all(call_key(c["name"], c["args"]) in keys for c in calls)


class _Turn:
    """What one reply leads to: a message to return, or feedback for another try (with tools or not)."""

    def __init__(
        self,
        message: AIMessage | None = None,
        feedback: list[BaseMessage] | None = None,
        with_tools: bool = True,
    ) -> None:
        self.message = message
        self.feedback = feedback or []
        self.with_tools = with_tools


def _failed_call(conversation: list[BaseMessage]) -> tuple[str, Any, str] | None:
    """(tool name, arguments, error text) when the conversation ends with a failed tool call."""
    if not conversation or not isinstance(conversation[-1], ToolMessage):
        return None
    last = conversation[-1]
    text = str(last.content)
    if last.status != "error" and not text.startswith(FAILURE_PREFIXES):
        return None
    for message in reversed(conversation):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call.get("id") == last.tool_call_id:
                    return call["name"], call.get("args") or {}, text[:1000]
    return None


def _deferred_calls(conversation: list[BaseMessage]) -> list[tuple[str, Any]]:
    """The calls put off by the last call turn, when the conversation ends with its results (not yet
    answered): (name, arguments) of those not made since."""
    if not conversation or not isinstance(conversation[-1], ToolMessage):
        return []
    for message in reversed(conversation):
        if isinstance(message, AIMessage):
            later = message.additional_kwargs.get(DEFERRED) or []
            return [(c["name"], c.get("args") or {}) for c in later if isinstance(c, dict) and "name" in c]
    return []


def _drops_the_result(conversation: list[BaseMessage], answer: str) -> bool:
    """True when `answer` follows one successful call with a short result and does not state it."""
    if not conversation or not isinstance(conversation[-1], ToolMessage):
        return False
    last = conversation[-1]
    result = str(last.content).strip().strip('"').strip()
    if last.status == "error" or not result or len(result) > GROUNDED_RESULT_CHARS:
        return False
    return not _holds(answer, result)


def _holds(answer: str, result: str) -> bool:
    """True when `answer` states `result`: the same number, or the same text ignoring case."""
    try:
        value = float(result.replace(",", ""))
    except ValueError:
        return result.lower() in answer.lower()
    return any(float(number.replace(",", "")) == value for number in _NUMBER.findall(answer))


def _text_only(reply: AIMessage) -> AIMessage:
    return AIMessage(content=reply.content, id=reply.id, response_metadata=reply.response_metadata)
