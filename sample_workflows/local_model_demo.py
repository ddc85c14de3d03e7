"""`make demo-llm`: the sample workflow's CrewAI agents, then a LangGraph agent, with a real language model
running on this machine (Qwen2.5-Coder-1.5B-Instruct through llama.cpp on 127.0.0.1, offline).

    .venv/bin/python sample_workflows/local_model_demo.py [--template repository|model] [--skip-workflow]
        [--workflow sample_workflows/local_model.canvas.json]

The workflow is `local_model.canvas.json` (a Statistician agent with the calculator, then a Calendar agent
with the date tool), sized for a 1.5B model; `--workflow` runs another canvas with the same model.

Prints each tool call the model makes as it happens (`model -> tool(args)`), what the executor did with
it, and each agent's answer; the server stops at the end. Needs `make install-llm` first (make demo-llm
runs it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

WORKFLOW = HERE / "local_model.canvas.json"
QUESTION = "What is the mean of 4, 8, 15, 16, 23 and 42? Use the calculator."


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def show_calls(who: str) -> Any:
    def show(calls: list[dict[str, Any]]) -> None:
        for call in calls:
            say(f"  {who}: model -> {call['name']}({json.dumps(call['args'], default=str)[:300]})")

    return show


def show_event(event: Any) -> None:
    kind = event.type
    if kind == "tool.completed":
        say(f"    executor: {event.tool_id} completed in {event.duration_ms or 0:.0f} ms")
    elif kind in ("tool.failed", "tool.timeout"):
        say(f"    executor: {event.tool_id} {kind.split('.')[1]}: {str(event.error)[:200]}")


def run_workflow_demo(server: Any, registry: Any, executor: Any, workflow: Path) -> None:
    from workflow_bridge.llm import local_crew_llm
    from workflow_bridge.runner import run_workflow

    canvas = json.loads(workflow.read_text(encoding="utf-8"))
    agents = [n["name"] for n in canvas.get("canvas_nodes", []) if n.get("type") == "Agent"]
    say(f"\n== CrewAI agents: {workflow} ({' -> '.join(agents)})")
    say(f"  input: {canvas.get('metadata', {}).get('default_input', '')[:300]}")
    llm = local_crew_llm(server)
    llm.on_tool_calls = show_calls("CrewAI agent")
    started = time.monotonic()
    state = run_workflow(workflow, registry=registry, executor=executor, llm=llm)
    say(f"  final answer ({time.monotonic() - started:.0f} s):\n{str(state.get('crew_result'))[:1200]}")


def run_langgraph_demo(server: Any, registry: Any, executor: Any) -> None:
    from langchain.agents import create_agent
    from langchain_core.messages import HumanMessage

    from workflow_bridge import make_tool_node
    from workflow_bridge.local_llm import local_chat_model

    say(f"\n== A LangGraph agent (create_agent, echo-tools' tool node): {QUESTION}")
    node = make_tool_node(registry, executor, ["tool_calculator"])
    agent = create_agent(local_chat_model(server, on_tool_calls=show_calls("LangGraph agent")), tools=node)
    started = time.monotonic()
    state = agent.invoke({"messages": [HumanMessage(QUESTION)]})
    say(f"  final answer ({time.monotonic() - started:.0f} s): {state['messages'][-1].content}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--template", default=None, help="repository (default), model, or a Jinja file")
    parser.add_argument("--skip-workflow", action="store_true", help="only the LangGraph agent")
    parser.add_argument("--workflow", type=Path, default=WORKFLOW, help="the canvas the CrewAI agents run")
    args = parser.parse_args(argv)

    from echo_tools import ToolExecutor, ToolRegistry
    from workflow_bridge.local_llm import MODEL_ALIAS, LocalModelError, LocalModelServer

    registry = ToolRegistry(discovery_dirs=[ROOT / "AgentTools"])
    registry.discover_local_tools()
    executor = ToolExecutor(registry)
    executor.add_sink(show_event)
    try:
        server = LocalModelServer(template=args.template)
        say(f"starting {MODEL_ALIAS} ({server.template_name} chat template, {server.threads} threads) ...")
        started = time.monotonic()
        with server:
            say(f"serving at {server.base_url} (loaded in {time.monotonic() - started:.0f} s)")
            if not args.skip_workflow:
                run_workflow_demo(server, registry, executor, args.workflow)
            run_langgraph_demo(server, registry, executor)
        say("\nserver stopped")
    except LocalModelError as exc:
        say(f"demo-llm: {exc}")
        return 1
    finally:
        executor.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
