"""ToolBindingPlugin: the few calls an existing EchoAI compiler makes to get real tools for its agents.

EchoAI's `CrewAIAdapter._bind_tools_to_agent`, its agent factory's `_bind_tools` and its canvas mapper's
`_resolve_tools` each replace with one call here (see docs/echoai.md). Every tool returned calls the one
`ToolExecutor`, so validation, limits and events are the same whichever framework asks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from echo_tools.models import ToolContext
from workflow_bridge.agent_factory import AgentFactory


class ToolBindingPlugin:
    """Tool binding for an existing compiler.

    Args:
        registry: the `ToolRegistry`.
        executor: the `ToolExecutor` every bound tool calls.
    """

    def __init__(self, registry: Any, executor: Any) -> None:
        self.registry = registry
        self.executor = executor
        self.factory = AgentFactory(registry, executor)

    @staticmethod
    def context_for(
        agent_config: Mapping[str, Any], state: Mapping[str, Any] | None = None, **ids: Any
    ) -> ToolContext:
        """The tool-call context of an agent: its id, and the run's ids from LangGraph state when given."""
        state = state or {}
        return ToolContext(
            agent_id=ids.get("agent_id") or agent_config.get("agent_id"),
            agent_name=ids.get("agent_name") or agent_config.get("name"),
            workflow_id=ids.get("workflow_id") or state.get("workflow_id"),
            run_id=ids.get("run_id") or state.get("run_id"),
            node_id=ids.get("node_id") or agent_config.get("agent_id"),
        )

    def crewai_tools_for(
        self, agent_config: Mapping[str, Any], context: ToolContext | None = None
    ) -> list[Any]:
        """CrewAI tools for an agent JSON (what EchoAI's `_bind_tools_to_agent` should have returned).

        Raises:
            ToolNotFoundError: the agent names a tool the registry does not have.
        """
        return self.factory.bind_tools(agent_config, context or self.context_for(agent_config))

    def langchain_tools_for(
        self, agent_config: Mapping[str, Any], context: ToolContext | None = None
    ) -> list[Any]:
        """LangChain `StructuredTool`s for an agent JSON (for `create_react_agent` or a model's `bind_tools`)."""
        from workflow_bridge.langgraph_tools import to_langchain_tool

        ctx = context or self.context_for(agent_config)
        return [
            to_langchain_tool(tool, self.executor, ctx, binding=binding)
            for tool, binding in self.factory.resolve_tools(agent_config)
        ]

    def tool_node_for(
        self, agent_config: Mapping[str, Any], context: ToolContext | None = None, **kwargs: Any
    ) -> Any:
        """A LangGraph tool node running the agent's tools through the executor (`ExecutorToolNode`)."""
        from workflow_bridge.langgraph_tools import make_tool_node

        # (tool, binding) pairs: a binding from the dict form of tool_bindings may carry no tool_id of its own
        refs = list(self.factory.resolve_tools(agent_config))
        return make_tool_node(
            self.registry, self.executor, refs, context or self.context_for(agent_config), **kwargs
        )

    def resolve_canvas_tools(
        self, node_tools: Any, *, node_id: str | None = None
    ) -> tuple[list[str], list[Any]]:
        """Resolve a canvas node's `config.tools` (any of the five entry shapes) to tool ids.

        Returns:
            (tool ids to put in the agent's `tools`, diagnostics naming each unknown or disabled entry).
        """
        from workflow_bridge.node_mapper import NodeMapper

        resolution = NodeMapper(self.registry).resolve_tools(node_tools, node_id=node_id)
        return list(resolution.tools), list(resolution.diagnostics)
