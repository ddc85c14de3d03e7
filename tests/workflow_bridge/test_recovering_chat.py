"""RecoveringChatModel (LangChain) and RecoveringCrewLLM (CrewAI) around scripted models: text calls become
calls, wrong tool names go back to the model with the closest names, repeated calls are stopped."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

import tests.workflow_bridge._compiler_support  # noqa: F401  (imports crewai quietly first)
from workflow_bridge.recovering_chat import RecoveringChatModel
from workflow_bridge.recovering_crew_llm import RecoveringCrewLLM


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression."""
    return "391"


class Scripted(BaseChatModel):
    """Answers with the scripted messages in order; records what it was asked and with which tools."""

    replies: list[Any]
    asked: list[list[BaseMessage]] = []
    tools_seen: list[int] = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        outer = self

        class Bound(Scripted):
            def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
                outer.tools_seen.append(len(tools))
                return outer._generate(messages, stop, **kw)

        return Bound(replies=[])

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.asked.append(list(messages))
        reply = self.replies.pop(0)
        message = reply if isinstance(reply, AIMessage) else AIMessage(content=reply)
        return ChatResult(generations=[ChatGeneration(message=message)])


def wrapped(*replies: Any) -> tuple[Any, Scripted]:
    inner = Scripted(replies=list(replies), asked=[], tools_seen=[])
    return RecoveringChatModel(model=inner).bind_tools([calculator]), inner


def test_a_call_written_as_fenced_json_becomes_a_tool_call():
    model, _ = wrapped('```json\n{"name": "calculator", "arguments": {"expression": "17*23"}}\n```')
    message = model.invoke([HumanMessage("What is 17*23?")])
    assert message.content == "" and [(c["name"], c["args"]) for c in message.tool_calls] == [
        ("calculator", {"expression": "17*23"})
    ]
    assert message.tool_calls[0]["id"].startswith("call_")


def test_a_plain_answer_with_braces_stays_an_answer():
    model, inner = wrapped("Use a dict like {'a': 1} here.")
    message = model.invoke([HumanMessage("Show a dict")])
    assert message.tool_calls == [] and message.content == "Use a dict like {'a': 1} here."
    assert len(inner.asked) == 1


def test_a_misspelled_tool_name_goes_back_to_the_model_with_the_closest_name():
    misspelled = AIMessage(
        content="", tool_calls=[{"name": "calculater", "args": {"expression": "1+1"}, "id": "c1"}]
    )
    model, inner = wrapped(misspelled, '{"name": "calculator", "arguments": {"expression": "1+1"}}')
    message = model.invoke([HumanMessage("What is 1+1?")])
    assert [c["name"] for c in message.tool_calls] == ["calculator"]
    feedback = inner.asked[1][-1]
    assert isinstance(feedback, HumanMessage) and "Did you mean 'calculator'?" in feedback.content


def test_a_text_call_to_an_unknown_tool_is_corrected_and_never_made():
    model, inner = wrapped(
        '{"name": "calc", "arguments": {}}',
        '{"name": "calc2", "arguments": {}}',
        '{"name": "c", "arguments": {}}',
    )
    message = model.invoke([HumanMessage("What is 1+1?")])
    assert message.tool_calls == [] and len(inner.asked) == 3


def test_arguments_that_are_not_json_go_back_to_the_model():
    broken = AIMessage(
        content="",
        invalid_tool_calls=[
            {"name": "calculator", "args": "{expression: 1+1", "id": "c1", "error": "bad json"}
        ],
    )
    model, inner = wrapped(broken, '{"name": "calculator", "arguments": {"expression": "1+1"}}')
    message = model.invoke([HumanMessage("What is 1+1?")])
    assert [c["args"] for c in message.tool_calls] == [{"expression": "1+1"}]
    assert "not a JSON object" in inner.asked[1][-1].content


def test_a_call_repeating_the_previous_one_is_stopped_and_the_model_answers_without_tools():
    history = [
        HumanMessage("What is 17*23?"),
        AIMessage(
            content="", tool_calls=[{"name": "calculator", "args": {"expression": "17*23"}, "id": "c1"}]
        ),
        ToolMessage("391", tool_call_id="c1"),
    ]
    model, inner = wrapped('{"name": "calculator", "arguments": {"expression": "17*23"}}', "It is 391.")
    message = model.invoke(history)
    assert message.tool_calls == [] and message.content == "It is 391."
    assert inner.tools_seen == [1]  # the second ask offered no tools
    assert "Do not call it again" in inner.asked[1][-1].content


def test_a_new_call_after_a_different_one_is_made():
    history = [
        HumanMessage("What is 17*23 and then plus 1?"),
        AIMessage(
            content="", tool_calls=[{"name": "calculator", "args": {"expression": "17*23"}, "id": "c1"}]
        ),
        ToolMessage("391", tool_call_id="c1"),
    ]
    model, _ = wrapped('{"name": "calculator", "arguments": {"expression": "391+1"}}')
    assert [c["args"] for c in model.invoke(history).tool_calls] == [{"expression": "391+1"}]


def test_on_tool_calls_sees_each_decided_call():
    seen: list[Any] = []
    inner = Scripted(
        replies=['{"name": "calculator", "arguments": {"expression": "2*2"}}'], asked=[], tools_seen=[]
    )
    model = RecoveringChatModel(model=inner, on_tool_calls=seen.append).bind_tools([calculator])
    model.invoke([HumanMessage("2*2?")])
    assert seen == [[{"name": "calculator", "args": {"expression": "2*2"}}]]


# -- CrewAI ----------------------------------------------------------------------------------------------

CREW_TOOLS = [{"type": "function", "function": {"name": "calculator", "parameters": {"type": "object"}}}]


class ScriptedCrew:
    """A stand-in for CrewAI's `LLM`: the same `call` signature, scripted replies."""

    model = "scripted"

    def __init__(self, *replies: Any) -> None:
        self.replies = list(replies)
        self.asked: list[tuple[list[dict[str, Any]], Any]] = []

    def call(self, messages: Any, tools: Any = None, **kwargs: Any) -> Any:
        self.asked.append((list(messages), tools))
        return self.replies.pop(0)


def test_crewai_a_fenced_text_call_becomes_an_openai_shaped_tool_call():
    llm = RecoveringCrewLLM(
        ScriptedCrew('```json\n{"name": "calculator", "arguments": {"expression": "6*7"}}\n```')
    )
    answer = llm.call([{"role": "user", "content": "6*7?"}], tools=CREW_TOOLS)
    assert isinstance(answer, list) and answer[0]["function"]["name"] == "calculator"
    assert json.loads(answer[0]["function"]["arguments"]) == {"expression": "6*7"}


def test_crewai_a_misspelled_native_call_is_corrected_with_did_you_mean():
    class Call:
        id = "c1"

        class function:  # noqa: N801  (the OpenAI object's attribute)
            name = "calculater"
            arguments = '{"expression": "6*7"}'

    inner = ScriptedCrew([Call()], '{"name": "calculator", "arguments": {"expression": "6*7"}}')
    answer = RecoveringCrewLLM(inner).call([{"role": "user", "content": "6*7?"}], tools=CREW_TOOLS)
    assert answer[0]["function"]["name"] == "calculator"
    assert "Did you mean 'calculator'?" in inner.asked[1][0][-1]["content"]


def test_crewai_a_repeated_call_is_stopped_and_a_plain_answer_returned():
    previous = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
            }
        ],
    }
    history = [
        {"role": "user", "content": "6*7?"},
        previous,
        {"role": "tool", "tool_call_id": "c1", "content": "42"},
    ]
    inner = ScriptedCrew('{"name": "calculator", "arguments": {"expression": "6*7"}}', "42")
    assert RecoveringCrewLLM(inner).call(history, tools=CREW_TOOLS) == "42"
    assert inner.asked[1][1] is None  # asked again without tools


def test_crewai_plain_text_with_braces_is_the_final_answer():
    inner = ScriptedCrew("The result is {'total': 42}.")
    assert RecoveringCrewLLM(inner).call("sum?", tools=CREW_TOOLS) == "The result is {'total': 42}."


def test_an_explanation_after_a_failed_call_is_sent_back_once_asking_for_the_corrected_call():
    failed = [
        HumanMessage("What is 17*23?"),
        AIMessage(content="", tool_calls=[{"name": "calculator", "args": {"expr": "17*23"}, "id": "c1"}]),
        ToolMessage(
            "Tool 'calculator' failed (validation): input.expr: unknown field",
            tool_call_id="c1",
            status="error",
        ),
    ]
    model, inner = wrapped(
        "You should pass the expression instead.",
        '{"name": "calculator", "arguments": {"expression": "17*23"}}',
    )
    message = model.invoke(failed)
    assert [c["args"] for c in message.tool_calls] == [{"expression": "17*23"}]
    assert (
        "The call to calculator failed: Tool 'calculator' failed (validation)" in inner.asked[1][-1].content
    )


def test_crewai_an_explanation_after_a_failed_call_is_sent_back_asking_for_the_corrected_call():
    history = [
        {"role": "user", "content": "6*7?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "Tool 'calculator' failed (validation): input: 'expression' is required.",
        },
    ]
    inner = ScriptedCrew(
        "It needs an expression.", '{"name": "calculator", "arguments": {"expression": "6*7"}}'
    )
    answer = RecoveringCrewLLM(inner).call(history, tools=CREW_TOOLS)
    assert answer[0]["function"]["name"] == "calculator"


def after_a_call(result: str) -> list[BaseMessage]:
    return [
        HumanMessage("What is 17 times 23?"),
        AIMessage(
            content="", tool_calls=[{"name": "calculator", "args": {"expression": "17*23"}, "id": "c1"}]
        ),
        ToolMessage(result, tool_call_id="c1"),
    ]


def test_an_answer_that_drops_the_result_is_asked_again_once_without_tools():
    model, inner = wrapped("The number of days between two dates is 365.", "17 times 23 is 391.")
    message = model.invoke(after_a_call("391"))
    assert message.content == "17 times 23 is 391." and message.tool_calls == []
    assert inner.tools_seen == [1]  # the second ask offered no tools
    assert inner.asked[1] == inner.asked[0]  # the same conversation, without the answer that dropped it


def test_an_answer_still_without_the_result_when_asked_again_is_returned_as_it_is():
    model, inner = wrapped("It is 365.", "I cannot say.")
    assert model.invoke(after_a_call("391")).content == "I cannot say."
    assert len(inner.asked) == 2  # asked again once, never a loop


def test_an_answer_stating_the_result_is_returned_at_once_in_any_number_format():
    model, inner = wrapped("The product is 1,391.0 exactly.")
    assert model.invoke(after_a_call("1391")).content == "The product is 1,391.0 exactly."
    text_model, text_inner = wrapped("The name is LINUS.")
    assert text_model.invoke(after_a_call('"Linus"')).content == "The name is LINUS."
    assert len(inner.asked) == 1 and len(text_inner.asked) == 1


def test_a_long_result_is_not_checked_against_the_answer():
    model, inner = wrapped("A summary of the page.")
    assert model.invoke(after_a_call("word " * 100)).content == "A summary of the page."
    assert len(inner.asked) == 1


# -- one call at a time, code instead of a call ----------------------------------------------------------


def two_calls(*expressions: str) -> AIMessage:
    calls = [
        {"name": "calculator", "args": {"expression": e}, "id": f"c{i}"} for i, e in enumerate(expressions)
    ]
    return AIMessage(content="", tool_calls=calls)  # type: ignore[arg-type]


def one_at_a_time(*replies: Any) -> tuple[Any, Scripted]:
    inner = Scripted(replies=list(replies), asked=[], tools_seen=[])
    return RecoveringChatModel(model=inner, max_calls_per_turn=1).bind_tools([calculator]), inner


def test_with_one_call_per_turn_only_the_first_of_dependent_calls_is_made():
    model, _ = one_at_a_time(two_calls("12*11", "132+10"))
    message = model.invoke([HumanMessage("Multiply 12 by 11, then add 10.")])
    assert [c["args"] for c in message.tool_calls] == [{"expression": "12*11"}]


def test_with_one_call_per_turn_a_plan_written_again_goes_on_with_its_first_new_call():
    history = [
        HumanMessage("Multiply 12 by 11, then add 10."),
        two_calls("12*11"),
        ToolMessage("132", tool_call_id="c0"),
    ]
    model, _ = one_at_a_time(two_calls("12*11", "132+10"))
    assert [c["args"] for c in model.invoke(history).tool_calls] == [{"expression": "132+10"}]


def test_without_a_limit_every_call_of_a_turn_is_made():
    model, _ = wrapped(two_calls("1+1", "2+2"))
    message = model.invoke([HumanMessage("1+1 and 2+2?")])
    assert [c["args"] for c in message.tool_calls] == [{"expression": "1+1"}, {"expression": "2+2"}]


CODE_REPLY = (
    "Let's implement it in Python using the tools.\n\n```python\ndef calculator(expression):\n"
    "    return eval(expression)\n\nprint(calculator('5*7'))\n```\n\nOutput: 42"
)


def test_code_running_a_tool_instead_of_calling_it_is_sent_back_asking_for_the_call():
    model, inner = wrapped(CODE_REPLY, '{"name": "calculator", "arguments": {"expression": "5*7"}}')
    message = model.invoke([HumanMessage("What is 5 times 7?")])
    assert [c["args"] for c in message.tool_calls] == [{"expression": "5*7"}]
    feedback = inner.asked[1][-1]
    assert isinstance(feedback, HumanMessage) and "Do not write code" in feedback.content
    assert '"name": "calculator"' in feedback.content and "<string>" in feedback.content


def test_code_that_does_not_run_a_tool_is_an_answer():
    code = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```"
    model, inner = wrapped(code)
    assert model.invoke([HumanMessage("Write an add function")]).content == code
    assert len(inner.asked) == 1


def test_code_sent_back_again_and_again_ends_as_the_model_s_text():
    model, inner = wrapped(CODE_REPLY, CODE_REPLY, CODE_REPLY)
    message = model.invoke([HumanMessage("What is 5 times 7?")])
    assert message.tool_calls == [] and message.content == CODE_REPLY
    assert len(inner.asked) == 3  # max_corrections (2) more asks, never a loop


def openai_calls(*expressions: str) -> list[dict[str, Any]]:
    return [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "calculator", "arguments": json.dumps({"expression": e})},
        }
        for i, e in enumerate(expressions)
    ]


def test_crewai_with_one_call_per_turn_the_first_new_call_is_made():
    llm = RecoveringCrewLLM(ScriptedCrew(openai_calls("12*11", "132+10")), max_calls_per_turn=1)
    first = llm.call([{"role": "user", "content": "12*11, then +10?"}], tools=CREW_TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in first] == [{"expression": "12*11"}]
    history = [
        {"role": "user", "content": "12*11, then +10?"},
        {"role": "assistant", "content": "", "tool_calls": openai_calls("12*11")},
        {"role": "tool", "tool_call_id": "c0", "content": "132"},
    ]
    again = RecoveringCrewLLM(ScriptedCrew(openai_calls("12*11", "132+10")), max_calls_per_turn=1)
    second = again.call(history, tools=CREW_TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in second] == [{"expression": "132+10"}]


def test_crewai_code_running_a_tool_is_sent_back_asking_for_the_call():
    crew = ScriptedCrew(CODE_REPLY, '{"name": "calculator", "arguments": {"expression": "5*7"}}')
    answer = RecoveringCrewLLM(crew).call([{"role": "user", "content": "5 times 7?"}], tools=CREW_TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in answer] == [{"expression": "5*7"}]
    assert "Do not write code" in crew.asked[1][0][-1]["content"]


def test_an_answer_right_after_a_result_with_calls_put_off_makes_them_as_planned():
    model, _ = one_at_a_time(two_calls("12*11", "12*11+10"))
    first = model.invoke([HumanMessage("Multiply 12 by 11, then add 10.")])
    assert first.additional_kwargs["deferred_tool_calls"] == [
        {"name": "calculator", "args": {"expression": "12*11+10"}}
    ]
    history = [HumanMessage("Multiply 12 by 11, then add 10."), first, ToolMessage("132", tool_call_id="c0")]
    model2, inner2 = one_at_a_time("The final number is 132.")
    second = model2.invoke(history)
    assert [c["args"] for c in second.tool_calls] == [{"expression": "12*11+10"}]
    assert second.content == "" and len(inner2.asked) == 1  # the early answer is dropped, nothing re-asked


def test_after_the_put_off_calls_ran_the_answer_must_hold_their_result():
    first = two_calls("12*11")
    first.additional_kwargs["deferred_tool_calls"] = [
        {"name": "calculator", "args": {"expression": "12*11+10"}}
    ]
    then = two_calls("12*11+10")
    history = [
        HumanMessage("12*11, then +10"),
        first,
        ToolMessage("132", tool_call_id="c0"),
        then,
        ToolMessage("142", tool_call_id="c0"),
    ]
    model, inner = one_at_a_time("It is 132.", "It is 142.")
    assert model.invoke(history).content == "It is 142."  # the plan is made once; then the result rule
    assert inner.tools_seen == [1]  # asked again without tools


def test_a_new_call_after_a_result_replaces_the_calls_put_off():
    first = two_calls("12*11")
    first.additional_kwargs["deferred_tool_calls"] = [{"name": "calculator", "args": {"expression": "9+10"}}]
    history = [HumanMessage("12*11, then +10"), first, ToolMessage("132", tool_call_id="c0")]
    model, _ = one_at_a_time(two_calls("132+10"))
    assert [c["args"] for c in model.invoke(history).tool_calls] == [{"expression": "132+10"}]


def test_a_turn_making_every_call_keeps_no_plan():
    model, _ = one_at_a_time(two_calls("1+1"))
    assert "deferred_tool_calls" not in model.invoke([HumanMessage("1+1?")]).additional_kwargs


def test_crewai_an_answer_right_after_a_result_with_calls_put_off_makes_them_as_planned():
    crew = ScriptedCrew(openai_calls("12*11", "12*11+10"), "The final number is 132.", "It is 142.")
    llm = RecoveringCrewLLM(crew, max_calls_per_turn=1)
    question = {"role": "user", "content": "12*11, then +10?"}
    first = llm.call([question], tools=CREW_TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in first] == [{"expression": "12*11"}]
    history = [
        question,
        {"role": "assistant", "content": "", "tool_calls": first},
        {"role": "tool", "tool_call_id": first[0]["id"], "content": "132"},
    ]
    second = llm.call(history, tools=CREW_TOOLS)
    assert [json.loads(c["function"]["arguments"]) for c in second] == [{"expression": "12*11+10"}]
    assert llm.call(history, tools=CREW_TOOLS) == "It is 142."  # made once: the next answer stands
