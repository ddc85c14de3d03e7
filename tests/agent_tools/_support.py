"""Shared helpers for the AgentTools tests: a registry that discovered every tool, and one call path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from echo_tools.registry import ToolRegistry

REPO_ROOT = Path(__file__).resolve().parents[2]
AGENT_TOOLS = REPO_ROOT / "AgentTools"
TOOL_FOLDERS = sorted(p.name for p in AGENT_TOOLS.iterdir() if (p / "tool_manifest.json").is_file())


def discovered_registry() -> ToolRegistry:
    """An in-memory registry that has discovered every manifest under AgentTools/."""
    registry = ToolRegistry(discovery_dirs=[AGENT_TOOLS])
    registry.discover_local_tools()
    return registry


def invoke(
    tool_ref: str, data: dict[str, Any], registry: ToolRegistry | None = None, context: Any = None
) -> Any:
    """Call a tool through the real executor (loopback egress allowed) and return its ToolResult."""
    from echo_tools.egress import EgressPolicy
    from echo_tools.executor import ToolExecutor

    executor = ToolExecutor(registry or discovered_registry(), egress=EgressPolicy.local())
    try:
        return executor.invoke_sync(tool_ref, data, context)
    finally:
        executor.close()
