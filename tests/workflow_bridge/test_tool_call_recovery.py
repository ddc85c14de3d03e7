"""Reading tool calls back from a small model's text: only real calls, only known tools, bounded work."""

from __future__ import annotations

import json

from workflow_bridge.tool_call_recovery import (
    MAX_CALLS,
    MAX_TEXT_CHARS,
    RecoveredCall,
    call_key,
    correction_for,
    recover_tool_calls,
    repeated_call,
    retry_instruction,
    tool_names_of,
    tool_schemas_of,
)

TOOLS = ["calculator", "get_weather"]
CALL = {"name": "calculator", "arguments": {"expression": "17*23"}}


def calls(text: str) -> list[RecoveredCall]:
    return recover_tool_calls(text, TOOLS).calls


def test_a_bare_json_call_is_recovered():
    assert calls(json.dumps(CALL)) == [RecoveredCall("calculator", {"expression": "17*23"})]


def test_a_fenced_call_with_a_short_preface_is_recovered():
    text = "I'll use the calculator:\n```json\n" + json.dumps(CALL, indent=2) + "\n```"
    assert calls(text) == [RecoveredCall("calculator", {"expression": "17*23"})]


def test_a_call_in_tool_call_tags_and_openai_shapes_are_recovered():
    tagged = "<tool_call>\n" + json.dumps(CALL) + "\n</tool_call>"
    openai = {"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}
    assert calls(tagged) == [RecoveredCall("calculator", {"expression": "17*23"})]
    assert calls(json.dumps(openai)) == [RecoveredCall("get_weather", {"city": "Oslo"})]
    assert calls(json.dumps({"name": "get_weather", "parameters": {"city": "Oslo"}})) == [
        RecoveredCall("get_weather", {"city": "Oslo"})
    ]


def test_several_calls_in_a_list_or_in_separate_fences_are_all_recovered():
    listed = json.dumps([CALL, {"name": "get_weather", "arguments": {"city": "Oslo"}}])
    fenced = "```json\n" + json.dumps(CALL) + "\n```\n```json\n" + json.dumps(CALL) + "\n```"
    assert [c.name for c in calls(listed)] == ["calculator", "get_weather"]
    assert len(calls(fenced)) == 2


def test_a_name_in_another_case_is_mapped_to_the_tool_name():
    assert calls(json.dumps({"name": "Calculator", "arguments": {}})) == [RecoveredCall("calculator", {})]


def test_a_plain_answer_holding_braces_is_not_a_call():
    for text in (
        "Here is the dict: {'a': 1, 'b': 2}",
        'The answer as JSON: {"result": 391}',
        '```python\nd = {"name": "calculator", "arguments": {}}\nprint(d)\n```',
        '{"name": "calculator", "arguments": {"expression": "1+1"}, "note": "an extra key"}',
        "def f():\n    return {x: y for x, y in pairs}",
    ):
        assert calls(text) == [], text


def test_a_call_quoted_inside_a_long_answer_stays_part_of_the_answer():
    text = "To compute it you would send " + json.dumps(CALL) + " to the tool. " + "Then explain. " * 40
    assert calls(text) == []


def test_a_call_naming_an_unknown_tool_makes_no_call_and_is_reported():
    recovery = recover_tool_calls(json.dumps({"name": "calculater", "arguments": {"expression": "1"}}), TOOLS)
    assert not recovery and recovery.calls == [] and recovery.unknown == ["calculater"]


def test_a_known_and_an_unknown_call_together_make_no_call():
    text = json.dumps([CALL, {"name": "rm_rf", "arguments": {}}])
    recovery = recover_tool_calls(text, TOOLS)
    assert recovery.calls == [] and recovery.unknown == ["rm_rf"]


def test_arguments_that_are_not_an_object_make_no_call():
    for arguments in ("not json", [1, 2], 5):
        text = json.dumps({"name": "calculator", "arguments": arguments})
        assert calls(text) == [], arguments


def test_a_huge_text_is_not_scanned():
    text = json.dumps(CALL) + " " * MAX_TEXT_CHARS
    assert recover_tool_calls(text, TOOLS).calls == []


def test_hostile_nesting_and_brace_floods_end_quickly_with_no_call():
    assert calls("[" * (MAX_TEXT_CHARS - 10)) == []
    assert calls("{" * (MAX_TEXT_CHARS - 10)) == []
    assert calls('{"a": ' * 2000) == []
    assert calls("```json\n```json\n```json\n" + json.dumps(CALL) + "\n```\n```\n```") == [
        RecoveredCall("calculator", {"expression": "17*23"})
    ]


def test_at_most_max_calls_are_returned():
    text = json.dumps([CALL] * (MAX_CALLS + 5))
    assert len(calls(text)) == MAX_CALLS


def test_an_overlong_name_or_a_non_string_is_no_call():
    assert recover_tool_calls(json.dumps({"name": "x" * 500, "arguments": {}}), ["x" * 500]).calls == []
    assert recover_tool_calls(None, TOOLS).calls == []
    assert recover_tool_calls(["not", "text"], TOOLS).calls == []


def test_repeated_call_finds_the_same_call_made_too_often_in_a_row():
    same = ("calculator", {"expression": "1+1"})
    other = ("calculator", {"expression": "2+2"})
    assert repeated_call([same, same], limit=2) is None
    assert repeated_call([same, same, same], limit=2) == same
    assert repeated_call([same, same, other], limit=2) is None
    assert call_key("a", {"x": 1, "y": 2}) == call_key("a", {"y": 2, "x": 1})


def test_the_correction_names_the_closest_real_tools():
    text = correction_for(["calculater"], TOOLS)
    assert "'calculater' is not one of your tools" in text and "Did you mean 'calculator'?" in text
    assert "calculator, get_weather" in text


def test_tool_names_are_read_from_openai_dicts_and_objects():
    class Named:
        name = "get_weather"

    assert tool_names_of([{"type": "function", "function": {"name": "calculator"}}, Named(), {"x": 1}]) == [
        "calculator",
        "get_weather",
    ]


def test_a_short_remark_after_the_call_still_makes_the_call_but_code_around_it_does_not():
    assert calls("```json\n" + json.dumps(CALL) + "\n```\nThis computes the product.") != []
    assert calls("print(" + json.dumps(CALL) + ")") == []
    assert calls("x = " + json.dumps(CALL)) == []


def test_the_retry_instruction_names_the_closest_tool_or_the_fields_to_fill():
    schemas = {
        "multiply": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}
    }
    renamed = retry_instruction(
        "multipy", {"a": 17, "b": 23}, "Error: 'multipy' is not a valid tool.", schemas
    )
    assert renamed.startswith("The call to multipy failed: Error: 'multipy' is not a valid tool.")
    assert renamed.endswith('{"name": "multiply", "arguments": {"a": 17, "b": 23}}')
    retyped = retry_instruction("multiply", {"a": "seventeen"}, "input.a: not a number", schemas)
    assert retyped.endswith('{"name": "multiply", "arguments": {"a": <number>, "b": <number>}}')


def test_tool_schemas_are_read_from_openai_tool_dicts():
    tools = [
        {"type": "function", "function": {"name": "multiply", "parameters": {"type": "object"}}},
        {"x": 1},
    ]
    assert tool_schemas_of(tools) == {"multiply": {"type": "object"}}


def test_a_call_quoting_a_json_document_in_single_quotes_is_read_as_a_python_literal():
    text = '```json\n{\n  "name": "calculator",\n  "arguments": {\n    "expression": \'{"a": [1, 2]}\'\n  }\n}\n```'
    assert calls(text) == [RecoveredCall("calculator", {"expression": '{"a": [1, 2]}'})]
    assert calls("{'a': 1, 'b': [2, 3]}") == []  # a dict literal that is no call stays text
    assert calls("'" + "{" * 5000 + "}" * 5000) == []  # nesting past the parser's limit: no call


def test_a_call_alone_in_a_json_fence_is_recovered_with_an_explanation_around_it():
    preface = "To find the value at `users.1.name` we can use the `json_get` function. Here's how:\n\n"
    remark = "\n\nThis will return the value, which is the name of the second user in the list. " * 3
    text = preface + "```json\n" + json.dumps(CALL, indent=2) + "\n```" + remark
    assert calls(text) != []
    assert calls(text.replace("```json", "```python")) == []  # code to read, not a call
    with_code = text + "\n```python\nprint(12 * 11)\n```\n```output\n132\n```"
    assert calls(with_code) != []  # the call the model showed, not the output it imagined for its code
    assert calls("```python\nd = " + json.dumps(CALL) + "\n```\n" + "Explained at length. " * 20) == []
    assert calls(text.replace("```json\n", "").replace("\n```", "")) == []  # quoted in prose, no fence


def test_first_new_calls_skips_calls_made_before_and_keeps_the_limit():
    from workflow_bridge.tool_call_recovery import first_new_calls

    made = [("calculator", {"expression": "12*11"})]
    calls = [("calculator", {"expression": "12*11"}), ("calculator", {"expression": "132+10"}), ("x", {})]
    assert first_new_calls(calls, made, 1) == [1]
    assert first_new_calls(calls, made, 2) == [1, 2]
    assert first_new_calls(calls[:1], made, 1) == [0]  # all made before: the first (a repeat, stopped later)
    assert first_new_calls(calls, [], 0) == [0]  # a limit under one still makes one call


def test_code_instead_of_call_finds_a_tool_run_inside_a_code_block_only():
    from workflow_bridge.tool_call_recovery import code_instead_of_call

    names = ["word_count", "calculator"]
    assert code_instead_of_call("```python\nn = word_count('a b')\nprint(n * 7)\n```", names) == "word_count"
    assert code_instead_of_call("```\nresult = tools.calculator ('1+1')", names) == "calculator"  # unclosed
    assert code_instead_of_call("I would call word_count('a b') for that.", names) is None  # prose, no code
    assert code_instead_of_call("```python\nmy_word_count('a')\nword_counter('b')\n```", names) is None
    assert code_instead_of_call("```python\nword_count\n```", names) is None  # named, not run
    assert code_instead_of_call(None, names) is None
    assert (
        code_instead_of_call("```python\nword_count(1)\n```" + " " * 20_000, names) is None
    )  # over the bound
