"""The code templates of the generator. Data is embedded as Python literals (`pprint`), never as code.

Only `repr`-quoted values reach the generated source, so a workflow or agent name cannot inject code.
"""

from __future__ import annotations

import pprint
from typing import Any

IMPORTS_LANGGRAPH = """\
import argparse
import logging
import sys
import uuid
from pathlib import Path

import AgentTools
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from workflow_bridge.compiler import WorkflowCompiler
from workflow_bridge.state import initial_state
"""

IMPORTS_CREWAI = """\
import argparse
import logging
import sys
from pathlib import Path

from crewai import Agent, Crew, Process, Task

import AgentTools
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from workflow_bridge.crewai_tools import to_crewai_tools
from workflow_bridge.llm import resolve_llm
"""

SHARED = '''
WORKFLOW_NAME = {name}
WORKFLOW = {workflow}
AGENTS = {agents}

logger = logging.getLogger("generated_workflow")


def build_registry():
    """The tool catalogue: every AgentTools manifest, discovered."""
    registry = ToolRegistry(discovery_dirs=[Path(AgentTools.__file__).parent])
    registry.discover_local_tools()
    return registry
'''

LANGGRAPH_BODY = '''

def build_graph(registry=None, executor=None, llm=None):
    """Compile the workflow into a LangGraph graph whose agents call their tools through the executor."""
    registry = registry or build_registry()
    executor = executor or ToolExecutor(registry)
    return WorkflowCompiler(registry, executor, llm=llm).compile(WORKFLOW, AGENTS)


def run(user_input, graph=None, run_id=None):
    """Run the workflow on one request and return the final state (EchoAI's state contract)."""
    graph = graph or build_graph()
    run_id = run_id or f"run_{{uuid.uuid4().hex}}"
    state = initial_state(user_input, WORKFLOW.get("workflow_id"), run_id)
    return graph.invoke(state, {{"configurable": {{"thread_id": run_id}}}})
'''

CREWAI_BODY = '''
PROCESS = {process}


def build_crew(registry=None, executor=None, llm=None):
    """One CrewAI agent and task per workflow agent, with the agent's tools bound through the executor."""
    registry = registry or build_registry()
    executor = executor or ToolExecutor(registry)
    agents, tasks = [], []
    for agent_id in WORKFLOW["agents"]:
        spec = AGENTS[agent_id]
        if spec.get("metadata", {{}}).get("node_type") in ("Start", "End"):
            continue  # the canvas's entry and exit points are not agents
        agent = Agent(
            role=spec.get("role") or spec.get("name") or agent_id,
            goal=spec.get("goal") or spec.get("description") or "Complete the task",
            backstory=spec.get("prompt") or spec.get("description") or "",
            tools=to_crewai_tools(spec.get("tools") or [], registry, executor),
            llm=llm or resolve_llm(spec.get("llm")),
            allow_delegation=PROCESS == "hierarchical",
            verbose=False,
        )
        agents.append(agent)
        tasks.append(
            Task(
                description=(spec.get("prompt") or spec.get("description") or spec.get("name") or agent_id)
                + "\\n\\nRequest: {{user_input}}",
                expected_output=spec.get("expected_output") or "A complete answer for the next step",
                agent=agent,
            )
        )
    if not agents:
        raise ValueError(f"workflow {{WORKFLOW_NAME!r}} has no agent nodes to run")
    if PROCESS == "hierarchical":
        return Crew(agents=agents[1:] or agents, tasks=tasks, process=Process.hierarchical, manager_agent=agents[0])
    return Crew(agents=agents, tasks=tasks, process=Process.sequential)


def run(user_input, crew=None):
    """Run the crew on one request and return its final output text."""
    crew = crew or build_crew()
    return str(crew.kickoff(inputs={{"user_input": user_input}}))
'''

MAIN_PRODUCTION = '''

def main(argv=None):
    """Command line: run the workflow on the request given as arguments (or read from stdin)."""
    parser = argparse.ArgumentParser(description=f"Run the generated workflow {{WORKFLOW_NAME!r}}")
    parser.add_argument("request", nargs="*", help="the user request")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    request = " ".join(args.request) or sys.stdin.read().strip()
{body}


if __name__ == "__main__":
    sys.exit(main())
'''

RUN_WITH_ERRORS = {
    "langgraph": """    try:
        state = run(request)
    except Exception:  # boundary: report any failure of the run and exit non-zero
        logger.exception("workflow %r failed", WORKFLOW_NAME)
        return 1
    print(state.get("crew_result", ""))
    return 0""",
    "crewai": """    try:
        output = run(request)
    except Exception:  # boundary: report any failure of the run and exit non-zero
        logger.exception("workflow %r failed", WORKFLOW_NAME)
        return 1
    print(output)
    return 0""",
}
RUN_PLAIN = {
    "langgraph": """    print(run(request).get("crew_result", ""))
    return 0""",
    "crewai": """    print(run(request))
    return 0""",
}


def literal(value: Any) -> str:
    """A deterministic Python literal for JSON data (sorted keys, wrapped at 100 columns)."""
    return pprint.pformat(value, width=100, sort_dicts=True)
