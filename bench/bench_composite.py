"""A `workflow` tool call around a one-agent workflow against running that workflow directly.

The workflow is Start-less: one CrewAI agent on the offline rehearsal model, bound to the trivial
`add(a, b)` tool, stored in a `WorkflowStore`. "Directly" compiles it once with `WorkflowCompiler` and runs
`graph.invoke(initial_state(...))` as EchoAI does; the tool call goes through the executor (validation,
events), reads the stored JSON again, finds the compiled graph in its cache, and runs the graph in a worker
thread under a sub-run whose context the agent's tool call inherits. Medians in microseconds.

Run: .venv/bin/python bench/bench_composite.py
"""

from __future__ import annotations

import os
import tempfile
import threading
import uuid
import warnings

os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("CREWAI_DISABLE_TRACKING", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")
warnings.simplefilter("ignore")

from _common import measure, report  # noqa: E402

from echo_tools import AgentStore, ToolExecutor, ToolRegistry, WorkflowStore  # noqa: E402

N = int(os.environ.get("BENCH_N", "60"))
REQUEST = 'Add these: {"a": 2, "b": 3}'
AGENT = {
    "agent_id": "agt_adder",
    "name": "Adder",
    "role": "Autonomous AI agent",
    "goal": "",
    "prompt": "Add the numbers with your tool.",
    "description": "Agent node",
    "llm": {"model": "rehearsal"},
    "tools": ["add"],
    "input_schema": [],
    "output_schema": ["sum"],
    "metadata": {"node_type": "Agent"},
}
WORKFLOW = {
    "workflow_id": "wf_adder",
    "name": "Adder",
    "version": "1.0",
    "execution_model": "sequential",
    "agents": ["agt_adder"],
    "connections": [],
    "state_schema": {},
    "metadata": {},
}


def build(root: str) -> tuple[ToolRegistry, ToolExecutor]:
    workflows, agents = WorkflowStore(f"{root}/workflows"), AgentStore(f"{root}/agents")
    workflows.save(WORKFLOW, state="final")
    agents.save(AGENT)
    registry = ToolRegistry(allowed_modules=["_common"], workflows=workflows, agents=agents)
    registry.register(
        {
            "tool_id": "add",
            "name": "add",
            "input_schema": {
                "type": "object",
                "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                "required": ["a", "b"],
            },
            "execution_config": {"module": "_common", "function": "add"},
        }
    )
    registry.register(
        {"tool_id": "adder", "name": "Adder workflow", "tool_type": "workflow",
         "execution_config": {"workflow_id": "wf_adder"}}
    )  # fmt: skip
    return registry, ToolExecutor(registry, event_sinks=[lambda event: None])


def main() -> None:
    from workflow_bridge import WorkflowCompiler, initial_state

    with tempfile.TemporaryDirectory() as root:
        registry, executor = build(root)
        from langgraph.checkpoint.memory import MemorySaver

        saver = MemorySaver()  # as the tool does: one per compiled graph, each run's thread deleted after
        graph = WorkflowCompiler(registry, executor, checkpointer=saver).compile(
            WORKFLOW, {"agt_adder": AGENT}
        )

        def direct() -> None:
            run_id = f"run_{uuid.uuid4().hex[:12]}"
            state = graph.invoke(
                initial_state(REQUEST, "wf_adder", run_id), {"configurable": {"thread_id": run_id}}
            )
            saver.delete_thread(run_id)
            assert "5" in state["crew_result"], state["crew_result"]

        def direct_in_a_thread() -> None:
            # the tool runs its graph on a thread of its own; this isolates what the tool adds around it
            worker = threading.Thread(target=direct)
            worker.start()
            worker.join()

        def as_tool() -> None:
            result = executor.invoke_sync("adder", {"user_input": REQUEST})
            assert result.success and "5" in result.output["crew_result"], result.error

        # alternate the two, so a change in machine load falls on both alike
        plain, threaded, wrapped = [], [], []
        for _ in range(5):
            plain.append(measure(direct, max(1, N // 5), warmup=3))
            threaded.append(measure(direct_in_a_thread, max(1, N // 5), warmup=3))
            wrapped.append(measure(as_tool, max(1, N // 5), warmup=3))
        direct_us, thread_us, tool_us = sorted(plain)[2], sorted(threaded)[2], sorted(wrapped)[2]
        executor.close()
    report(
        [
            ["one-agent workflow, graph.invoke in the main thread", direct_us, direct_us / thread_us],
            ["the same, graph.invoke on a new thread", thread_us, 1.0],
            ["the same workflow as a `workflow` tool call", tool_us, tool_us / thread_us],
        ],
        title=f"workflow tool overhead (median of 5 rounds of {max(1, N // 5)} runs)",
        headers=["", "median us", "ratio"],
    )


if __name__ == "__main__":
    main()
