"""Choosing an agent's model, and the offline rehearsal model's deterministic behaviour."""

from __future__ import annotations

import json
import logging

import pytest

import tests.workflow_bridge._compiler_support  # noqa: F401  (imports crewai quietly first)
from workflow_bridge.llm import LLMConfigError, is_rehearsal, llm_from_spec, provider_of, resolve_llm
from workflow_bridge.llm_rehearsal import RehearsalLLM
from workflow_bridge.text_arguments import build_arguments, sections


@pytest.fixture(autouse=True)
def no_llm_settings(monkeypatch):
    for key in ("ECHO_LLM", "ECHO_LLM_MODEL", "ECHO_LLM_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)


def test_with_nothing_configured_the_rehearsal_model_is_chosen():
    assert is_rehearsal(resolve_llm(None))
    # EchoAI's default agent llm names gpt-4o-mini, but without OPENAI_API_KEY it cannot run here
    assert is_rehearsal(resolve_llm({"model": "gpt-4o-mini", "temperature": 0.7, "max_tokens": 4000}))


def test_an_agents_model_with_its_key_in_the_environment_is_used(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    llm = resolve_llm({"model": "gpt-4o-mini", "temperature": 0.2, "max_tokens": 123})
    assert not is_rehearsal(llm)
    assert (llm.model, llm.temperature, llm.max_tokens) == ("gpt-4o-mini", 0.2, 123)


def test_an_agents_base_url_selects_an_openai_compatible_server():
    llm = resolve_llm({"model": "llama3.1", "base_url": "http://127.0.0.1:11434/v1"})
    assert not is_rehearsal(llm) and llm.model == "llama3.1" and llm.base_url == "http://127.0.0.1:11434/v1"


def test_echo_llm_applies_when_the_agent_has_no_runnable_model(monkeypatch):
    monkeypatch.setenv("ECHO_LLM", "http://127.0.0.1:8000/v1#qwen2.5")
    llm = resolve_llm({"model": "claude-sonnet-4-5", "temperature": 0.5})
    assert llm.model == "qwen2.5" and llm.temperature == 0.5
    monkeypatch.setenv("ECHO_LLM", "rehearsal")
    assert is_rehearsal(resolve_llm({}))


def test_the_callers_default_comes_before_echo_llm(monkeypatch):
    monkeypatch.setenv("ECHO_LLM", "http://127.0.0.1:8000/v1#qwen2.5")
    assert is_rehearsal(resolve_llm({}, default="rehearsal"))
    given = RehearsalLLM()
    assert resolve_llm({}, default=given) is given


def test_a_server_url_without_a_model_is_an_error_naming_the_spec():
    with pytest.raises(LLMConfigError) as info:
        llm_from_spec("http://127.0.0.1:8000/v1")
    assert "'http://127.0.0.1:8000/v1'" in str(info.value) and "ECHO_LLM_MODEL" in str(info.value)


def test_providers_are_inferred_from_model_names():
    assert provider_of("openai/gpt-4o") == "openai"
    assert provider_of("claude-opus-4-20250514") == "anthropic"
    assert provider_of("gpt-4o-mini") == "openai"
    assert provider_of("mistral-large", "Azure") == "azure"
    assert provider_of("llama3") is None


TASK = """ORIGINAL USER REQUEST:
Add 2 and 3.5 please. Settings: {"operation": "add", "precision": 2}
```python
print(2 + 3.5)
```

YOUR ROLE:
Calculator"""


def test_rehearsal_arguments_come_from_json_objects_code_blocks_defaults_and_enums():
    schema = {
        "type": "object",
        "properties": {
            "operation": {"type": "string", "enum": ["sum", "add"]},
            "precision": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "values": {"type": "array", "items": {"type": "number"}},
            "code": {"type": "string"},
            "query": {"type": "string"},
            "mode": {"type": "string", "enum": ["fast", "deep"]},
            "region": {"type": "string", "default": "eu"},
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["operation", "precision", "values", "code", "query", "mode", "region", "note"],
    }
    args = build_arguments(schema, TASK)
    assert args == {
        "operation": "add",
        "precision": 2,
        "values": [2.0, 3.5],
        "code": "print(2 + 3.5)",
        "query": sections(TASK)["ORIGINAL USER REQUEST"],
        "mode": "fast",
        "region": "eu",
    }


def test_the_rehearsal_calls_each_tool_once_then_reports_their_results():
    llm = RehearsalLLM()
    tools = [
        {
            "type": "function",
            "function": {
                "name": "echo",
                "parameters": {"properties": {"text": {"type": "string"}}, "required": ["text"]},
            },
        },
        {
            "type": "function",
            "function": {
                "name": "score",
                "parameters": {"properties": {"subject": {"type": "string"}}, "required": ["subject"]},
            },
        },
    ]
    first = llm.call(
        [{"role": "user", "content": "Current Task: ORIGINAL USER REQUEST:\nhello"}], tools=tools
    )
    assert [c["function"]["name"] for c in first] == ["echo", "score"]
    assert json.loads(first[0]["function"]["arguments"]) == {"text": "hello"}
    history = [
        {"role": "user", "content": "ORIGINAL USER REQUEST:\nhello"},
        {"role": "assistant", "content": None, "tool_calls": first},
        {"role": "tool", "name": "echo", "content": '{"echo": "hello"}'},
        {"role": "tool", "name": "score", "content": '{"risk_score": 15}'},
    ]
    answer = llm.call(history, tools=tools)
    assert (
        answer
        == '[rehearsal] agent:\n- echo returned: {"echo": "hello"}\n- score returned: {"risk_score": 15}'
    )
    assert llm.call(history, tools=tools) == answer  # deterministic


def test_the_rehearsal_without_tools_answers_in_react_form_with_the_previous_output():
    text = RehearsalLLM().call("ORIGINAL USER REQUEST:\nsummarise\n\nPREVIOUS AGENT OUTPUT:\nthe draft")
    assert text.startswith("Thought: ") and "Final Answer: [rehearsal] agent:" in text
    assert "previous agent output: the draft" in text


def test_the_rehearsal_token_estimate_does_not_log_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        assert RehearsalLLM().get_input_tokens_count("abcdefgh") == 2
    assert not caplog.records


def test_the_compilers_llm_overrides_every_agents_config(monkeypatch):
    from tests.workflow_bridge._compiler_support import make_executor, make_registry
    from workflow_bridge.crewai_adapter import CrewAIAdapter

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    registry = make_registry()
    executor, _ = make_executor(registry)
    configured = {"agent_id": "a", "llm": {"model": "gpt-4o-mini", "temperature": 0.1}}
    assert not is_rehearsal(CrewAIAdapter(registry, executor).llm_for(configured))
    assert is_rehearsal(CrewAIAdapter(registry, executor, llm="rehearsal").llm_for(configured))
    served = CrewAIAdapter(registry, executor, llm="http://127.0.0.1:9/v1#qwen").llm_for(configured)
    assert (served.model, served.temperature) == ("qwen", 0.1)


def test_rehearsal_gives_the_code_block_to_the_code_parameter_and_not_to_test_code():
    schema = {
        "type": "object",
        "properties": {"code": {"type": "string"}, "test_code": {"type": "string"}},
        "required": ["code"],
    }
    task = "ORIGINAL USER REQUEST:\nTest this:\n```python\ndef f():\n    return 1\n```\n"
    args = build_arguments(schema, task)
    assert args["code"].startswith("def f()")
    assert "test_code" not in args
