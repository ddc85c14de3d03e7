"""`sampling/createMessage` from real MCP servers (our FastMCP server over stdio and streamable HTTP, and
the reference server-everything): the caller's model answers within the server's token budget, each
answer or refusal is a `tool.sampling` event, and without a model the server gets a refusal at once.
"""

from __future__ import annotations

import json
import threading

import pytest
from crewai import LLM
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.errors import ToolConfigError
from echo_tools.mcp.callbacks import DEFAULT_SAMPLING_MAX_TOKENS, sampling_llm
from tests.echo_tools._mcp_support import (
    SERVERS,
    make_registry,
    stdio_config,
)
from tests.workflow_bridge._openai_server import scripted_openai_server
from workflow_bridge.llm_rehearsal import RehearsalLLM

ASKING = SERVERS / "asking_server.py"


def executor_for(registry: ToolRegistry) -> tuple[ToolExecutor, MemoryEventLog]:
    from echo_tools import EgressPolicy

    log = MemoryEventLog()
    return ToolExecutor(registry, event_sinks=[log], egress=EgressPolicy.local()), log


def sampled(log: MemoryEventLog) -> list[dict]:
    return [e.metadata for e in log.events if e.type == "tool.sampling"]


def test_without_a_model_the_server_gets_a_refusal_naming_the_call(asking):
    _, executor, log = asking
    result = executor.invoke_sync("mcp_asking_summarise", {"text": "a long story"})
    answer = json.loads(result.output["result"])
    assert "sampling refused: no model is bound to this call of 'mcp_asking_summarise'" in answer["error"]
    assert sampled(log) == [
        {"mcp_server": "asking", "max_tokens": 50, "outcome": "refused", "reason": answer["error"]}
    ]


def test_crewai_llm_against_an_openai_speaking_server_answers_with_the_cap(asking, monkeypatch):
    _, executor, log = asking
    with scripted_openai_server(["A story, shortened."]) as server:
        llm = LLM(model="openai/gpt-4o-mini", base_url=server.url, api_key="sk-dummy")
        with sampling_llm(llm):
            result = executor.invoke_sync("mcp_asking_summarise", {"text": "a long story", "max_tokens": 60})
    assert json.loads(result.output["result"]) == {"text": "A story, shortened.", "model": "gpt-4o-mini"}
    (request,) = server.requests
    assert request["messages"] == [
        {"role": "system", "content": "Answer in one line."},
        {"role": "user", "content": "Summarise: a long story"},
    ]
    assert request.get("max_tokens", request.get("max_completion_tokens")) == 60
    assert llm.max_tokens is None  # the cap went to a copy, not to the agent's own model
    (event,) = sampled(log)
    assert event == {
        "mcp_server": "asking",
        "max_tokens": 60,
        "outcome": "answered",
        "model": "gpt-4o-mini",
        "answer_chars": len("A story, shortened."),
    }


def test_a_langchain_chat_model_answers(asking):
    _, executor, _ = asking
    model = GenericFakeChatModel(messages=iter([AIMessage(content="short")]))
    with sampling_llm(model):
        result = executor.invoke_sync("mcp_asking_summarise", {"text": "x"})
    assert json.loads(result.output["result"]) == {"text": "short", "model": "GenericFakeChatModel"}


def test_over_budget_is_refused_naming_the_value_and_the_budget(asking):
    _, executor, log = asking
    llm = RehearsalLLM()
    with sampling_llm(llm):
        result = executor.invoke_sync("mcp_asking_summarise", {"text": "x", "max_tokens": 500})
    error = json.loads(result.output["result"])["error"]
    assert "maxTokens 500 exceeds the remaining token budget 200" in error
    assert "mcpServers.asking.sampling_max_tokens" in error
    assert llm.calls == []  # the model was never asked
    assert sampled(log)[0]["outcome"] == "refused"


def test_a_bad_budget_in_the_config_names_the_field_and_the_value(tmp_path):
    registry = make_registry(tmp_path)
    with pytest.raises(ToolConfigError) as caught:
        registry.add_mcp_server("asking", stdio_config(ASKING, sampling_max_tokens="lots"))
    assert "'sampling_max_tokens' must be a positive integer, got 'lots'" in caught.value.message
    assert caught.value.field == "mcpServers.asking.sampling_max_tokens"
    assert registry.list_mcp_servers() == {}


def test_a_failing_model_is_the_servers_error_not_a_hang(asking):
    _, executor, log = asking
    with scripted_openai_server([]) as server:
        url = server.url
    # nothing listens there any more: the model's call fails, and the server hears why
    with sampling_llm(LLM(model="openai/gpt-4o-mini", base_url=url, api_key="sk-dummy")):
        result = executor.invoke_sync("mcp_asking_summarise", {"text": "x"})
    assert "sampling failed: the model raised" in json.loads(result.output["result"])["error"]
    assert sampled(log)[0]["outcome"] == "failed"


@pytest.mark.slow
def test_sampling_over_streamable_http(tmp_path, asking_http):
    registry = make_registry(tmp_path)
    registry.add_mcp_server("asking", {"url": asking_http.url})
    executor, log = executor_for(registry)
    try:
        with sampling_llm(RehearsalLLM()):
            result = executor.invoke_sync("mcp_asking_summarise", {"text": "over http"})
    finally:
        executor.close()
    answer = json.loads(result.output["result"])
    assert answer["model"] == "echo-rehearsal" and "Summarise: over http" in answer["text"]
    assert sampled(log)[0]["max_tokens"] == 50


@pytest.mark.slow
def test_server_everything_offers_and_runs_its_sampling_tool(everything):
    registry, executor = everything
    assert "mcp_everything_trigger_sampling_request" in {
        t.tool_id for t in registry.list_by_tags(["mcp_server:everything"])
    }
    log = MemoryEventLog()
    executor.add_sink(log)
    try:
        with sampling_llm(RehearsalLLM()):
            ok = executor.invoke_sync(
                "mcp_everything_trigger_sampling_request", {"prompt": "hi", "maxTokens": 10}
            )
        over = executor.invoke_sync(
            "mcp_everything_trigger_sampling_request",
            {"prompt": "hi", "maxTokens": DEFAULT_SAMPLING_MAX_TOKENS + 1},
        )
    finally:
        executor.remove_sink(log)
    assert ok.success and '"model": "echo-rehearsal"' in str(ok.output)
    assert not over.success or "refused" in str(over.output)
    assert [e["outcome"] for e in sampled(log)] == ["answered", "refused"]


def test_a_request_while_calls_of_two_callers_are_in_flight_is_refused_not_misrouted(asking, tmp_path):
    _, executor, log = asking
    started, gate = tmp_path / "started", tmp_path / "gate"
    first_model, second_model = RehearsalLLM(), RehearsalLLM()
    outcome: dict = {}

    def first_call() -> None:
        with sampling_llm(first_model):
            outcome["first"] = executor.invoke_sync(
                "mcp_asking_summarise_when", {"text": "first", "started": str(started), "gate": str(gate)}
            )

    worker = threading.Thread(target=first_call)
    worker.start()
    try:
        waiter = threading.Event()
        while not started.exists() and worker.is_alive():  # the first call is in flight on the server
            waiter.wait(0.02)
        with sampling_llm(second_model):
            second = executor.invoke_sync("mcp_asking_summarise", {"text": "second"})
    finally:
        gate.write_text("go", encoding="utf-8")
        worker.join(60)
    refused = json.loads(second.output["result"])["error"]
    assert "2 calls of different callers were in flight" in refused
    assert second_model.calls == []
    answered = json.loads(outcome["first"].output["result"])  # alone again: its own model answers
    assert answered["model"] == "echo-rehearsal" and "Summarise: first" in answered["text"]
    assert len(first_model.calls) == 1 and "Summarise: first" in json.dumps(first_model.calls)


def test_sampling_is_counted_in_calls_not_only_tokens(asking):
    from echo_tools import Budget, BudgetMeter, ToolContext

    _, executor, log = asking
    llm = RehearsalLLM()
    meter = BudgetMeter(Budget(max_llm_calls=5))
    with sampling_llm(llm):  # 10 requests of one token each fit the 200-token budget, not the call count
        result = executor.invoke_sync(
            "mcp_asking_summarise_times", {"text": "x", "times": 10}, ToolContext(budget=meter)
        )
    answer = json.loads(result.output["result"])
    assert answer["answered"] == 5
    assert "budget max_llm_calls=5 is exhausted" in answer["error"]
    assert len(llm.calls) == 5
    assert sampled(log)[-1]["limit"] == "budget.max_llm_calls"


def test_one_request_s_calls_share_one_sampling_budget(asking):
    from echo_tools import Budget, BudgetMeter, ToolContext

    _, executor, _ = asking
    context = ToolContext(budget=BudgetMeter(Budget(max_llm_calls=3)))
    with sampling_llm(RehearsalLLM()):
        first = executor.invoke_sync("mcp_asking_summarise_times", {"text": "x", "times": 2}, context)
        second = executor.invoke_sync("mcp_asking_summarise_times", {"text": "x", "times": 2}, context)
    assert json.loads(first.output["result"]) == {"answered": 2}
    answer = json.loads(second.output["result"])
    assert answer["answered"] == 1 and "max_llm_calls=3" in answer["error"]
