"""Deterministic stand-ins for paid LLMs, driving real CrewAI and LangGraph runs in tests.

All three models follow a *script*: a list of steps, one consumed per model call. A step is
  - a `str`: the final answer;
  - a list of tool calls, each `{"name": tool_name, "args": {...}}` (optionally `"id"`): call those tools;
  - a callable `step(messages, tools) -> str | list[call]`: decide from what the model was sent.
When the script runs out the model answers `final_answer(last_observation)`, so a one-step script
`[[{"name": "add", "args": {...}}]]` means "call add, then report what it returned".

    FunctionCallingLLM  CrewAI `BaseLLM`, `supports_function_calling()` True: returns OpenAI-shaped
                        tool calls, which CrewAI runs through its native path.
    ReActTextLLM        CrewAI `BaseLLM` without function calling: writes "Thought / Action / Action Input"
                        text, which CrewAI parses and runs through its ReAct path.
    ScriptedChatModel   LangChain `BaseChatModel`: returns `AIMessage`s with `tool_calls`; `bind_tools`
                        keeps the model (so `create_react_agent` accepts it) and records the tool names.

Every model records what it was sent in `.requests` (one dict per call: `messages`, `tools`) and
`observations()` returns the tool results it was shown, in order.
"""

from __future__ import annotations

import itertools
import json
import threading
import warnings
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

# crewai 1.15's own import trips an ImportWarning (crewai.rag refuses the attribute for its child module
# 'embeddings'), which filterwarnings=error would turn into a collection error.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", "Cannot set an attribute on 'crewai", ImportWarning)
    from crewai.llms.base_llm import BaseLLM
    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from pydantic import Field, PrivateAttr

Step = str | list[dict[str, Any]] | Callable[[Any, Any], Any]

_ids = itertools.count(1)


def final_answer(observation: str | None) -> str:
    """What a scripted model answers once its script is used up."""
    return (
        f"Done. Last tool result: {observation}" if observation is not None else "Done. No tool was called."
    )


def _call_id(call: dict[str, Any]) -> str:
    return str(call.get("id") or f"call_{next(_ids)}")


class _Script:
    """The shared step logic: thread-safe, records requests."""

    def __init__(self, steps: Sequence[Step]) -> None:
        self.steps = list(steps)
        self.position = 0
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def next(self, messages: Any, tools: Any, last_observation: str | None) -> str | list[dict[str, Any]]:
        with self.lock:
            self.requests.append({"messages": messages, "tools": tools})
            if self.position >= len(self.steps):
                return final_answer(last_observation)
            step = self.steps[self.position]
            self.position += 1
        if callable(step):
            step = step(messages, tools)
        return step


def _last_observation_from_dicts(messages: Any) -> str | None:
    if isinstance(messages, str):
        return None
    for message in reversed(list(messages or [])):
        role = message.get("role") if isinstance(message, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if role == "tool":
            return str(content)
        if isinstance(content, str) and "Observation:" in content:
            return content.rsplit("Observation:", 1)[1].strip()
    return None


class _ScriptedCrewLLM(BaseLLM):
    steps: list[Any] = Field(default_factory=list)
    _script: _Script = PrivateAttr()
    default_model: ClassVar[str] = "scripted"

    def __init__(self, steps: Sequence[Step] = (), **kwargs: Any) -> None:
        kwargs.setdefault("model", type(self).default_model)
        super().__init__(steps=list(steps), **kwargs)

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        self._script = _Script(self.steps)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._script.requests

    def observations(self) -> list[str]:
        """The tool results this model was shown, oldest first (tool messages or ReAct observations)."""
        if not self.requests or isinstance(self.requests[-1]["messages"], str):
            return []
        out: list[str] = []
        for message in self.requests[-1]["messages"]:
            content = message.get("content") if isinstance(message, dict) else None
            if message.get("role") == "tool":
                out.append(str(content))
            elif message.get("role") == "assistant" and isinstance(content, str):
                # CrewAI appends "Observation: <result>" to the model's own ReAct text; a result ends at
                # the first blank line (CrewAI adds its tool reminder after failures)
                for chunk in content.split("Observation:")[1:]:
                    text = chunk.strip().split("\n\n")[0].strip()
                    if not text.startswith("the result of the action"):  # CrewAI's format reminder
                        out.append(text)
        return out

    def get_input_tokens_count(self, messages: Any, tools: Any = None, response_model: Any = None) -> int:
        return len(json.dumps(messages, default=str)) // 4

    def supports_stop_words(self) -> bool:
        return False

    def get_context_window_size(self) -> int:
        return 128_000

    async def acall(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        return self.call(
            messages, tools, callbacks, available_functions, from_task, from_agent, response_model
        )


class FunctionCallingLLM(_ScriptedCrewLLM):
    """A CrewAI LLM using native function calling; see the module docstring for `steps`."""

    default_model: ClassVar[str] = "scripted-function-calling"

    def supports_function_calling(self) -> bool:
        return True

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        step = self._script.next(messages, tools, _last_observation_from_dicts(messages))
        if isinstance(step, str):
            return step
        return [
            {
                "id": _call_id(call),
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(call.get("args", {}))},
            }
            for call in step
        ]


class ReActTextLLM(_ScriptedCrewLLM):
    """A CrewAI LLM without function calling: answers in the ReAct text format CrewAI parses."""

    default_model: ClassVar[str] = "scripted-react"

    def supports_function_calling(self) -> bool:
        return False

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        step = self._script.next(messages, tools, _last_observation_from_dicts(messages))
        if isinstance(step, str):
            return f"Thought: I now know the final answer\nFinal Answer: {step}"
        if len(step) != 1:
            raise ValueError(f"The ReAct format carries one tool call per turn, the script has {len(step)}")
        call = step[0]
        return (
            f"Thought: I should use the {call['name']} tool.\n"
            f"Action: {call['name']}\n"
            f"Action Input: {json.dumps(call.get('args', {}))}"
        )


class ScriptedChatModel(BaseChatModel):
    """A LangChain chat model that emits scripted tool calls; see the module docstring for `steps`."""

    steps: list[Any] = Field(default_factory=list)
    bound_tools: list[str] = Field(default_factory=list)
    _script: _Script = PrivateAttr()

    def model_post_init(self, __context: Any) -> None:
        super().model_post_init(__context)
        self._script = _Script(self.steps)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self._script.requests

    def observations(self) -> list[str]:
        """The `ToolMessage` contents this model was shown, oldest first."""
        last = self.requests[-1]["messages"] if self.requests else []
        return [str(m.content) for m in last if isinstance(m, ToolMessage)]

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:  # type: ignore[override]
        self.bound_tools = [getattr(t, "name", None) or getattr(t, "__name__", str(t)) for t in tools]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        last = next((str(m.content) for m in reversed(messages) if isinstance(m, ToolMessage)), None)
        step = self._script.next(list(messages), self.bound_tools, last)
        if isinstance(step, str):
            message = AIMessage(content=step)
        else:
            calls = [
                {"name": c["name"], "args": c.get("args", {}), "id": _call_id(c), "type": "tool_call"}
                for c in step
            ]
            message = AIMessage(content="", tool_calls=calls)
        return ChatResult(generations=[ChatGeneration(message=message)])
