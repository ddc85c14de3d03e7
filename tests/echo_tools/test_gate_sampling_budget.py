"""Issue 35: MCP sampling counted only `maxTokens` toward the budget, so a server asking with maxTokens 1
sent prompts of its choosing (~640,000 tokens in 50 calls under a 1,024-token budget) to the caller's model.
The prompt's tokens (an estimate: `echo_tools.gate.estimate_tokens`) and the answer's count too, against the
call's `sampling_max_tokens` and the request's `max_llm_tokens`. Against the real asking MCP server
(tests/echo_tools/mcp_servers/asking_server.py, a sampling budget of 200 tokens per call, over stdio)."""

from __future__ import annotations

import json

from echo_tools import ToolContext
from echo_tools.gate import Budget, BudgetMeter
from echo_tools.mcp.callbacks import sampling_llm
from workflow_bridge.llm_rehearsal import RehearsalLLM


def test_a_long_prompt_with_max_tokens_1_is_refused_before_the_model_sees_it(asking) -> None:  # type: ignore[no-untyped-def]
    _, executor, log = asking
    llm = RehearsalLLM()
    with sampling_llm(llm):
        result = executor.invoke_sync("mcp_asking_summarise", {"text": "x" * 12_800, "max_tokens": 1})
    error = json.loads(result.output["result"])["error"]
    assert "prompt" in error and "exceeds the remaining token budget 200" in error, error
    assert llm.calls == []


def test_many_small_asks_spend_the_call_s_budget_on_their_prompts(asking) -> None:  # type: ignore[no-untyped-def]
    _, executor, _ = asking
    llm = RehearsalLLM()
    with sampling_llm(llm):
        result = executor.invoke_sync("mcp_asking_summarise_times", {"text": "y" * 200, "times": 50})
    answer = json.loads(result.output["result"])
    # each ask costs its prompt (about 58 tokens) and its answer: 200 tokens go in a few asks, not 50
    assert 0 < answer["answered"] < 5, answer
    assert "token budget" in answer["error"]
    assert len(llm.calls) == answer["answered"]


def test_the_request_s_token_budget_counts_prompt_and_answer(asking) -> None:  # type: ignore[no-untyped-def]
    _, executor, _ = asking
    meter = BudgetMeter(Budget(max_llm_tokens=100))
    with sampling_llm(RehearsalLLM()):
        result = executor.invoke_sync(
            "mcp_asking_summarise_times", {"text": "z" * 200, "times": 50}, ToolContext(budget=meter)
        )
    answer = json.loads(result.output["result"])
    assert answer["answered"] == 1 and "max_llm_tokens" in answer["error"], answer
    assert meter.llm_calls == 1 and 50 < meter.llm_tokens <= 100


def test_the_meter_counts_a_sampling_call_s_prompt() -> None:
    from echo_tools.gate import estimate_tokens

    meter = BudgetMeter(Budget(max_llm_tokens=100))
    assert meter.sample(10, prompt_tokens=80) is None and meter.llm_tokens == 90
    spent = meter.sample(1, prompt_tokens=20)
    assert spent is not None and spent.field == "budget.max_llm_tokens"
    assert estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("é" * 4) == 2
