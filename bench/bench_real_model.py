"""20 tool tasks with the real local model: stock LangGraph agent vs the same agent with echo-tools.

    (a) stock:  LangChain's `create_agent(ChatOpenAI(...), tools=[LangChain tools])`
    (b) echo:   `create_agent(RecoveringChatModel(ChatOpenAI(...)), tools=ExecutorToolNode(...))`: the
                same functions as catalogue tools run by the executor, text tool calls recovered, wrong
                names corrected, repeated calls stopped

each with the chat template inside the weights (`model`) and with the repository's template
(`repository`). Tasks and expected answers: bench/real_model_tasks.json (arithmetic, JSON, dates, text,
two-step); the tools: bench/_real_model_tools.py. A task succeeds when its final answer holds the expected
number (or text, ignoring case). Reported per variant: successes out of 20, median seconds per task, tool
calls per task (mean). Goal: (b) >= 18/20 with either template, and never below (a) on the same template.

Run (after `make install-llm`; about 80 agent runs, minutes on a quiet machine, much longer on a busy one):
    .venv/bin/python bench/bench_real_model.py [--templates model,repository] [--variants stock,echo]
        [--tasks arith-1,json-2] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(ROOT), str(HERE)]

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    import crewai  # noqa: F401  (quiet first import, as the tests do)

import _real_model_tools  # noqa: E402

TASKS = json.loads((HERE / "real_model_tasks.json").read_text(encoding="utf-8"))
RECURSION_LIMIT = 12  # model and tool steps per task: a model that keeps calling tools fails the task
SYSTEM = "You are a careful assistant. Use the tools to compute answers, then state the final answer."


def numbers_in(text: str) -> set[float]:
    return {float(n.replace(",", "")) for n in re.findall(r"-?\d[\d,]*(?:\.\d+)?", text)}


def succeeded(answer: str, expected: Any) -> bool:
    if '"arguments"' in answer:  # an unmade call written as text (it may echo the task's own values)
        return False
    if isinstance(expected, (int, float)):
        return float(expected) in numbers_in(answer)
    return str(expected).lower() in answer.lower()


def stock_agent(server: Any) -> Any:
    from langchain.agents import create_agent
    from langchain_core.tools import tool

    from workflow_bridge.local_llm import stock_chat_model

    tools = [tool(function) for function in _real_model_tools.TOOLS]
    return create_agent(stock_chat_model(server), tools=tools, system_prompt=SYSTEM)


def echo_agent(server: Any) -> Any:
    from langchain.agents import create_agent

    from echo_tools import ToolExecutor, ToolRegistry
    from echo_tools import tool as catalogue_tool
    from workflow_bridge import make_tool_node
    from workflow_bridge.local_llm import local_chat_model

    registry = ToolRegistry(allowed_modules=["_real_model_tools"])
    for function in _real_model_tools.TOOLS:
        registry.register(catalogue_tool(function, side_effect="pure").tool_def)
    node = make_tool_node(registry, ToolExecutor(registry), [f.__name__ for f in _real_model_tools.TOOLS])
    return create_agent(local_chat_model(server), tools=node, system_prompt=SYSTEM)


def run_task(agent: Any, task: dict[str, Any]) -> dict[str, Any]:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    started = time.monotonic()
    answer, calls, error = "", 0, None
    try:
        state = agent.invoke(
            {"messages": [HumanMessage(task["prompt"])]}, {"recursion_limit": RECURSION_LIMIT}
        )
        messages = state["messages"]
        calls = sum(isinstance(m, ToolMessage) for m in messages)
        last = messages[-1]
        answer = str(last.content) if isinstance(last, AIMessage) and not last.tool_calls else ""
    except Exception as exc:  # a failed task (HTTP 500, recursion limit), counted as such
        error = f"{type(exc).__name__}: {str(exc)[:160]}"
    return {
        "task": task["id"],
        "ok": error is None and succeeded(answer, task["expected"]),
        "seconds": round(time.monotonic() - started, 2),
        "tool_calls": calls,
        "answer": answer[:200],
        "error": error,
    }


def run_variant(
    server: Any, variant: str, tasks: list[dict[str, Any]], template: str
) -> list[dict[str, Any]]:
    agent = stock_agent(server) if variant == "stock" else echo_agent(server)
    results = []
    for task in tasks:
        result = run_task(agent, task)
        results.append(result)
        mark = "ok  " if result["ok"] else "FAIL"
        detail = result["error"] or result["answer"].replace("\n", " ")[:90]
        print(
            f"  [{template}/{variant}] {mark} {task['id']:<8} {result['seconds']:6.1f} s "
            f"{result['tool_calls']} calls  {detail}",
            flush=True,
        )
    return results


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "success": sum(r["ok"] for r in results),
        "tasks": len(results),
        "median_seconds": round(statistics.median(r["seconds"] for r in results), 2) if results else None,
        "tool_calls_per_task": round(statistics.mean(r["tool_calls"] for r in results), 2)
        if results
        else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--templates", default="model,repository")
    parser.add_argument("--variants", default="stock,echo")
    parser.add_argument("--tasks", default="", help="task ids, comma-separated (default: all 20)")
    parser.add_argument("--json", default="", help="write every result to this file")
    args = parser.parse_args(argv)

    from workflow_bridge.local_llm import LocalModelServer, missing_reason

    reason = missing_reason()
    if reason:  # `make bench` runs every bench: without the model this one is skipped, saying why
        print(f"bench_real_model: skipped: {reason}")
        return 0
    chosen = set(filter(None, args.tasks.split(",")))
    tasks = [t for t in TASKS if not chosen or t["id"] in chosen]
    report: dict[str, Any] = {}
    for template in args.templates.split(","):
        with LocalModelServer(template=template) as server:
            print(f"== template {template}: {server.base_url}, {server.threads} threads", flush=True)
            for variant in args.variants.split(","):
                results = run_variant(server, variant, tasks, template)
                report[f"{template}/{variant}"] = {"summary": summary(results), "results": results}
    print("\nvariant                   success   median s/task   tool calls/task")
    for name, entry in report.items():
        s = entry["summary"]
        print(
            f"{name:<25} {s['success']:>2}/{s['tasks']:<5} {s['median_seconds']:>13} {s['tool_calls_per_task']:>17}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
