"""Shared inputs of the NodeMapper tests: a registry holding a corpus's stored tools, and canvas builders."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from echo_tools.registry import ToolRegistry

if TYPE_CHECKING:
    from tests.conftest import Corpus


def corpus_registry(corpus: Corpus) -> ToolRegistry:
    """An in-memory registry with the corpus's five stored tool files (they name AgentTools modules)."""
    registry = ToolRegistry()
    for path in sorted((corpus / "tools").glob("tool_*.json")):
        if path.name != "tool_index.json":
            registry.register(json.loads(path.read_text(encoding="utf-8")))
    return registry


def save_payload(web_search_schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """The canvas save payload of echoai-notes §1.10, as the IDE's saveCanvas sends it."""
    schema = web_search_schema or {"type": "object", "properties": {"query": {"type": "string"}}}
    return {
        "canvas_nodes": [
            {
                "type": "Start",
                "label": "Start",
                "icon": "▶️",
                "color": "#10b981",
                "description": "Workflow entry point",
                "config": {
                    "inputVariables": [
                        {"name": "query", "type": "string", "required": True, "description": ""}
                    ]
                },
                "id": 1769588771000,
                "x": 100,
                "y": 100,
                "name": "Workflow Start",
                "status": "idle",
            },
            {
                "type": "Agent",
                "label": "Agent",
                "icon": "🔶",
                "color": "#f59e0b",
                "description": "Autonomous AI agent",
                "id": 1769588780000,
                "x": 380,
                "y": 100,
                "name": "Web Search Agent",
                "status": "idle",
                "config": {
                    "prompt": "",
                    "model": {
                        "provider": "anthropic",
                        "modelName": "claude-sonnet-4-5-20250514",
                        "displayName": "Claude Sonnet 4.5",
                    },
                    "tools": [
                        {
                            "id": 1769588790000,
                            "tool_id": "tool_web_search",
                            "name": "Web Search",
                            "type": "local",
                            "description": "Performs web searches …",
                            "enabled": True,
                            "version": "1.0",
                            "tags": ["search", "web", "internet", "research", "bing"],
                            "config": schema,
                        },
                        {
                            "id": 1769588795000,
                            "name": "Code Execution",
                            "type": "code",
                            "enabled": True,
                            "config": {"language": "python", "code": ""},
                        },
                    ],
                    "maxIterations": 5,
                    "variables": [],
                    "routing": {"strategy": "llm-driven", "routes": []},
                    "temperature": 0.7,
                    "topP": 0.9,
                    "maxTokens": 4000,
                    "memory": {"enabled": True, "type": "short-term"},
                    "adornments": [],
                },
            },
            {
                "type": "End",
                "label": "End",
                "icon": "⏹️",
                "color": "#64748b",
                "description": "Workflow exit point",
                "config": {"outputVariables": [{"name": "result", "type": "string"}]},
                "id": 1769588800000,
                "x": 660,
                "y": 100,
                "name": "Workflow End",
                "status": "idle",
            },
        ],
        "connections": [
            {"id": 1769588810000, "from": 1769588771000, "to": 1769588780000},
            {"id": 1769588811000, "from": 1769588780000, "to": 1769588800000},
        ],
        "workflow_name": "Untitled Workflow",
        "save_as": "draft",
        "execution_model": "sequential",
        "workflow_id": None,
    }


def node(node_id: Any, node_type: str, name: str | None = None, **config: Any) -> dict[str, Any]:
    """A canvas node as the IDE writes it."""
    return {
        "id": node_id,
        "type": node_type,
        "name": name or f"{node_type} {node_id}",
        "x": 0,
        "y": 0,
        "status": "idle",
        "config": config,
    }


def canvas(nodes: list[dict[str, Any]], edges: list[tuple[Any, Any]], **extra: Any) -> dict[str, Any]:
    """A save payload from nodes and (from, to) pairs."""
    conns = [{"id": 900 + i, "from": a, "to": b} for i, (a, b) in enumerate(edges)]
    return {"canvas_nodes": nodes, "connections": conns, "workflow_name": "Test", **extra}


def chain(*nodes: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A save payload whose nodes are connected one after another."""
    ids = [n["id"] for n in nodes]
    return canvas(list(nodes), list(zip(ids, ids[1:], strict=False)), **extra)


def without_timestamps(agents: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Agents with `metadata.created_at` removed (the only field that differs between two mappings)."""
    out = {}
    for agent_id, agent in agents.items():
        copy = json.loads(json.dumps(agent))
        copy["metadata"].pop("created_at", None)
        out[agent_id] = copy
    return out
