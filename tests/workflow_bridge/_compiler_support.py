"""Shared inputs of the compiler tests: a registry of local test tools, workflow builders, an executor."""

from __future__ import annotations

import warnings
from typing import Any

# crewai 1.15 emits an ImportWarning ("Cannot set an attribute on 'crewai.rag' for child module
# 'embeddings'") on first import, which filterwarnings=error turns into a collection error.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ImportWarning)
    import crewai  # noqa: F401

from echo_tools.events import MemoryEventLog
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry

MODULE = "tests.workflow_bridge._compiler_tools"


def _tool(name: str, function: str, properties: dict[str, Any], required: list[str], **extra: Any) -> dict:
    return {
        "name": name,
        "description": f"Test tool {name}.",
        "tool_type": "local",
        "input_schema": {"type": "object", "properties": properties, "required": required},
        "execution_config": {"module": MODULE, "function": function},
        **extra,
    }


def tool_definitions() -> list[dict[str, Any]]:
    text = {"type": "string"}
    return [
        _tool("Echo", "echo", {"text": text, "prefix": {"type": "string", "default": "echo"}}, ["text"]),
        _tool("Score", "score", {"subject": text}, ["subject"]),
        _tool("Broken", "broken", {"reason": text}, ["reason"]),
        _tool("Meet A", "meet_a", {"topic": text}, ["topic"]),
        _tool("Meet B", "meet_b", {"topic": text}, ["topic"]),
        _tool("Retired", "echo", {"text": text}, ["text"], status="disabled"),
        {
            **_tool(
                "HTTP Request",
                "http_like",
                {"url": text, "method": text, "headers": {"type": "object"}, "json": {}},
                ["url"],
            ),
            "tool_id": "tool_http_request",
        },
    ]


def make_registry() -> ToolRegistry:
    registry = ToolRegistry(allowed_modules=[MODULE])
    for definition in tool_definitions():
        registry.register(definition)
    return registry


def make_executor(registry: ToolRegistry) -> tuple[ToolExecutor, MemoryEventLog]:
    log = MemoryEventLog()
    return ToolExecutor(registry, event_sinks=[log]), log


def agent(agent_id: str, node_type: str = "Agent", name: str | None = None, **fields: Any) -> dict[str, Any]:
    """An EchoAI agent JSON of the given canvas node type."""
    metadata = {"node_type": node_type, **fields.pop("metadata", {})}
    roles = {"Start": "Workflow entry point", "End": "Workflow exit point"}
    return {
        "agent_id": agent_id,
        "name": name or agent_id,
        "role": fields.pop("role", roles.get(node_type, "Autonomous AI agent")),
        "goal": "",
        "prompt": fields.pop("prompt", ""),
        "description": f"{node_type} node",
        "llm": {"model": "", "temperature": 0.3, "max_tokens": 4000},
        "tools": fields.pop("tools", []),
        "input_schema": fields.pop("input_schema", []),
        "output_schema": fields.pop("output_schema", []),
        "metadata": metadata,
        **fields,
    }


def workflow(
    agents: list[dict[str, Any]], edges: list[tuple[str, str]], model: str = "sequential", **extra: Any
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(workflow JSON, agents by id) with connections from `edges`."""
    wf = {
        "workflow_id": extra.pop("workflow_id", "wf_test"),
        "name": "Test workflow",
        "status": "draft",
        "version": "0.1",
        "execution_model": model,
        "agents": [a["agent_id"] for a in agents],
        "connections": [{"from": a, "to": b} for a, b in edges],
        "state_schema": extra.pop("state_schema", {}),
        "metadata": {},
        **extra,
    }
    return wf, {a["agent_id"]: a for a in agents}


def chain(*agents: dict[str, Any], **extra: Any) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    ids = [a["agent_id"] for a in agents]
    return workflow(list(agents), list(zip(ids, ids[1:], strict=False)), **extra)


def run(
    graph: Any, user_input: str, run_id: str = "run_test", workflow_id: str = "wf_test", **payload: Any
) -> dict:
    from workflow_bridge.state import initial_state

    state = initial_state(user_input, workflow_id, run_id, **payload)
    return graph.invoke(state, {"configurable": {"thread_id": run_id}})


def agent_tools_registry() -> ToolRegistry:
    """An in-memory registry holding the repository's AgentTools (discovered from their manifests)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    registry = ToolRegistry(discovery_dirs=[root / "AgentTools"])
    registry.discover_local_tools()
    return registry
