"""AgentFactory: real tool binding for EchoAI agent definitions, and the CrewAI agents built from them.

EchoAI's factory returned placeholder dicts and its adapter bound disabled tools and skipped unknown ones
silently. Here an agent's `tools` (ids or names, or `["*"]` minus `tools_exclude`) resolve through the
registry; only active tools are bound; a binding with `enabled: false` is left out; `fixed` parameters and
a `description` override travel to the adapter; an unknown tool is an error naming the agent and the tool.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from echo_tools.errors import ToolNotFoundError
from echo_tools.mcp.bound import bound_in_scope
from echo_tools.models import ToolContext, ToolDef, ToolStatus
from echo_tools.suggest import tool_hint
from workflow_bridge.canvas.code_entries import code_tool, has_code
from workflow_bridge.canvas.mcp_entries import mcp_server_tool
from workflow_bridge.canvas.subworkflow_entries import SUBWORKFLOW_KINDS, subworkflow_tool

logger = logging.getLogger("workflow_bridge.agent_factory")

CODE_TOOL = "tool_code_executor"


def agent_label(agent_def: Mapping[str, Any]) -> str:
    """`'Name' (agt_...)` for messages."""
    return f"{agent_def.get('name') or 'agent'!r} ({agent_def.get('agent_id') or '?'})"


def persona(agent_def: Mapping[str, Any]) -> tuple[str, str, str]:
    """(role, goal, backstory) the CrewAI agent is prompted with, from the canvas node.

    EchoAI fills `role` with a fixed text per node type ("Autonomous AI agent") and `description` with
    "<Type> node" when the node sets none; those say nothing to the model, so the node's name stands in
    for the role, and its prompt (or name) for the backstory.
    """
    from workflow_bridge.canvas.entries import ROLE_BY_TYPE

    name = str(agent_def.get("name") or "Agent")
    node_type = str((agent_def.get("metadata") or {}).get("node_type") or "Agent")
    role = str(agent_def.get("role") or "")
    if not role.strip() or role in ROLE_BY_TYPE.values():
        role = name
    goal = str(agent_def.get("goal") or "").strip() or f"Complete the task of the {name!r} step"
    description = str(agent_def.get("description") or "").strip()
    if description in ("", f"{node_type} node", "Agent node"):
        description = ""
    backstory = description or str(agent_def.get("prompt") or "").strip() or f"{name}, a step of a workflow"
    return role, goal, backstory


def bindings_of(agent_def: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The agent's `tool_bindings` keyed by tool reference (accepts a list of dicts or a dict)."""
    raw = agent_def.get("tool_bindings") or {}
    if isinstance(raw, Mapping):
        return {str(k): dict(v) for k, v in raw.items() if isinstance(v, Mapping)}
    out: dict[str, dict[str, Any]] = {}
    for item in raw if isinstance(raw, list) else []:
        if isinstance(item, Mapping) and item.get("tool_id"):
            out[str(item["tool_id"])] = dict(item)
    return out


class AgentFactory:
    """Binds registry tools to agent definitions and builds `crewai.Agent`s with them.

    Args:
        registry: the `ToolRegistry` tools resolve through.
        executor: the `ToolExecutor` every bound tool calls.
    """

    def __init__(self, registry: Any, executor: Any) -> None:
        self.registry = registry
        self.executor = executor

    def resolve_tools(self, agent_def: Mapping[str, Any]) -> list[tuple[ToolDef, dict[str, Any] | None]]:
        """The active tools an agent gets, each with its binding (or None).

        Raises:
            ToolNotFoundError: a tool the agent names is not in the registry.
        """
        refs = [self._builtin(agent_def, r) for r in _as_list(agent_def.get("tools"))]
        refs = [r for r in refs if r is not None]
        bindings = bindings_of(agent_def)
        if "*" in refs:
            excluded = {self._require(agent_def, r).tool_id for r in _as_list(agent_def.get("tools_exclude"))}
            tools = [t for t in self.registry.list_all() if t.tool_id not in excluded]
        else:
            tools = [self._require(agent_def, r) for r in refs]
        chosen: list[tuple[ToolDef, dict[str, Any] | None]] = []
        seen: set[str] = set()
        for tool in tools:
            if tool.tool_id in seen:
                continue
            seen.add(tool.tool_id)
            binding = bindings.get(tool.tool_id) or _binding_by_ref(bindings, tool)
            if binding is not None and binding.get("enabled") is False:
                continue
            if tool.status != ToolStatus.ACTIVE:
                logger.warning(
                    "agent %s: tool %r is %s and is not bound",
                    agent_label(agent_def),
                    tool.tool_id,
                    tool.status,
                )
                continue
            chosen.append((tool, binding))
        return chosen

    def _builtin(self, agent_def: Mapping[str, Any], ref: Any) -> Any:
        # EchoAI's built-in canvas tools: "Code Execution" runs through the code_executor tool when it is
        # registered; a sub-workflow through the workflow tool its binding's workflowId names (an error
        # when there is none); raw MCP-server entries have no tool to run and are not bound.
        if not (isinstance(ref, str) and ref.startswith("builtin_")):
            return ref
        kind = ref.removeprefix("builtin_")
        binding = bindings_of(agent_def).get(ref) or {}
        config = binding.get("config") if isinstance(binding.get("config"), Mapping) else {}
        if kind == "code" and has_code(config or {}):  # a Code tool with code: its main is the tool
            tool, _, problem = code_tool(self.registry, config or {}, binding.get("name"))
            if tool is None:
                raise ToolNotFoundError(
                    f"Agent {agent_label(agent_def)}: tool {ref!r}: {problem}", field="tools"
                )
            return tool.tool_id
        if ref == "builtin_code" and self.registry.resolve(CODE_TOOL) is not None:
            return CODE_TOOL
        if kind == "mcp_server" and (config or {}).get("serverId"):  # the server's tool, or why not
            tool, _, problem = mcp_server_tool(self.registry, config or {})
            if tool is None:
                raise ToolNotFoundError(
                    f"Agent {agent_label(agent_def)}: tool {ref!r}: {problem}", field="tools"
                )
            return tool.tool_id
        if kind in SUBWORKFLOW_KINDS:
            tool, problem = subworkflow_tool(self.registry, kind, config or {})
            if tool is None:
                raise ToolNotFoundError(
                    f"Agent {agent_label(agent_def)}: tool {ref!r}: {problem}", field="tools"
                )
            return tool.tool_id
        logger.warning(
            "agent %s: built-in tool %r has no registered tool and is not bound", agent_label(agent_def), ref
        )
        return None

    def _require(self, agent_def: Mapping[str, Any], ref: Any) -> ToolDef:
        ref = ref.get("tool_id") or ref.get("name") if isinstance(ref, Mapping) else ref
        tool = self.registry.resolve(ref) if isinstance(ref, str) else None
        tool = tool or bound_in_scope(ref)  # a canvas MCP server bound for this compile or run only
        if tool is None:
            raise ToolNotFoundError(
                f"Agent {agent_label(agent_def)} names tool {ref!r}, which is not in the registry; "
                "register it, discover AgentTools, or remove it from the agent's tools"
                + tool_hint(self.registry, ref)  # ". Did you mean 'Calculator'?"
            )
        return tool

    def bind_tools(self, agent_def: Mapping[str, Any], context: ToolContext | None = None) -> list[Any]:
        """CrewAI tools for the agent, each calling the executor with `context`'s ids."""
        from workflow_bridge.crewai_tools import to_crewai_tool

        context = context or ToolContext(agent_id=agent_def.get("agent_id"), agent_name=agent_def.get("name"))
        return [
            to_crewai_tool(tool, self.executor, context, binding=binding)
            for tool, binding in self.resolve_tools(agent_def)
        ]

    def create_agent(
        self,
        agent_def: Mapping[str, Any],
        *,
        context: ToolContext | None = None,
        llm: Any = None,
        tools: list[Any] | None = None,
        role: str | None = None,
    ) -> Any:
        """A `crewai.Agent` for the definition, its tools bound, its model from `llm.resolve_llm`."""
        from crewai import Agent

        from workflow_bridge.llm import resolve_llm

        own_role, goal, backstory = persona(agent_def)
        constraints = agent_def.get("constraints") or {}
        max_iter = constraints.get("max_steps") if isinstance(constraints, Mapping) else None
        return Agent(
            role=role or own_role,
            goal=goal,
            backstory=backstory,
            tools=tools if tools is not None else self.bind_tools(agent_def, context),
            llm=llm if llm is not None else resolve_llm(agent_def.get("llm")),
            allow_delegation=False,
            max_iter=max_iter if isinstance(max_iter, int) and max_iter > 0 else 5,
            verbose=False,
        )


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (str, Mapping)):
        return [value]
    return list(value) if isinstance(value, Iterable) else []


def _binding_by_ref(bindings: dict[str, dict[str, Any]], tool: ToolDef) -> dict[str, Any] | None:
    for key in (tool.name, tool.slug, tool.llm_name):
        if key in bindings:
            return bindings[key]
    return None
