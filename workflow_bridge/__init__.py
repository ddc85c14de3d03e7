"""EchoAI canvas and workflow JSON -> LangGraph graphs whose CrewAI agents have their tools bound.

Every public name of the bridge is importable from here. They load on first use, so mapping a canvas
(`NodeMapper`) does not pay for importing CrewAI and LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from echo_tools._telemetry import disable_third_party_telemetry as _disable_telemetry
from echo_tools.extras import require

_disable_telemetry()  # the bridge uses CrewAI: its telemetry defaults are set before CrewAI loads

if TYPE_CHECKING:
    from workflow_bridge.agent_factory import AgentFactory
    from workflow_bridge.agent_json import normalize_agent
    from workflow_bridge.compiler import WorkflowCompileError, WorkflowCompiler
    from workflow_bridge.conditions import ConditionError, evaluate_condition
    from workflow_bridge.crewai_adapter import CrewAIAdapter
    from workflow_bridge.crewai_tools import ExecutorCrewTool, to_crewai_tool, to_crewai_tools
    from workflow_bridge.langgraph_tools import (
        ExecutorToolNode,
        make_tool_node,
        to_langchain_tool,
        to_langchain_tools,
    )
    from workflow_bridge.llm import LLMConfigError, is_rehearsal, llm_from_spec, local_crew_llm, resolve_llm
    from workflow_bridge.llm_rehearsal import REHEARSAL_NOTICE, RehearsalLLM
    from workflow_bridge.local_llm import LocalModelServer, local_chat_model
    from workflow_bridge.node_mapper import (
        Diagnostic,
        MappedWorkflow,
        NodeMapper,
        agent_id_for,
    )
    from workflow_bridge.plugin import ToolBindingPlugin
    from workflow_bridge.recovering_chat import RecoveringChatModel
    from workflow_bridge.recovering_crew_llm import RecoveringCrewLLM
    from workflow_bridge.runner import (
        WorkflowSourceError,
        compile_source,
        resume_workflow,
        run_workflow,
        stream_run,
    )
    from workflow_bridge.state import build_state_schema, initial_state
    from workflow_bridge.tool_call_recovery import recover_tool_calls

_LAZY = {
    "AgentFactory": "workflow_bridge.agent_factory",
    "ConditionError": "workflow_bridge.conditions",
    "CrewAIAdapter": "workflow_bridge.crewai_adapter",
    "Diagnostic": "workflow_bridge.node_mapper",
    "ExecutorCrewTool": "workflow_bridge.crewai_tools",
    "ExecutorToolNode": "workflow_bridge.langgraph_tools",
    "LLMConfigError": "workflow_bridge.llm",
    "LocalModelServer": "workflow_bridge.local_llm",
    "MappedWorkflow": "workflow_bridge.node_mapper",
    "NodeMapper": "workflow_bridge.node_mapper",
    "REHEARSAL_NOTICE": "workflow_bridge.llm_rehearsal",
    "RecoveringChatModel": "workflow_bridge.recovering_chat",
    "RecoveringCrewLLM": "workflow_bridge.recovering_crew_llm",
    "RehearsalLLM": "workflow_bridge.llm_rehearsal",
    "ToolBindingPlugin": "workflow_bridge.plugin",
    "WorkflowCompileError": "workflow_bridge.compiler",
    "WorkflowCompiler": "workflow_bridge.compiler",
    "WorkflowSourceError": "workflow_bridge.runner",
    "agent_id_for": "workflow_bridge.node_mapper",
    "build_state_schema": "workflow_bridge.state",
    "compile_source": "workflow_bridge.runner",
    "evaluate_condition": "workflow_bridge.conditions",
    "initial_state": "workflow_bridge.state",
    "is_rehearsal": "workflow_bridge.llm",
    "llm_from_spec": "workflow_bridge.llm",
    "local_chat_model": "workflow_bridge.local_llm",
    "local_crew_llm": "workflow_bridge.llm",
    "make_tool_node": "workflow_bridge.langgraph_tools",
    "normalize_agent": "workflow_bridge.agent_json",
    "recover_tool_calls": "workflow_bridge.tool_call_recovery",
    "resolve_llm": "workflow_bridge.llm",
    "resume_workflow": "workflow_bridge.runner",
    "run_workflow": "workflow_bridge.runner",
    "stream_run": "workflow_bridge.runner",
    "to_crewai_tool": "workflow_bridge.crewai_tools",
    "to_crewai_tools": "workflow_bridge.crewai_tools",
    "to_langchain_tool": "workflow_bridge.langgraph_tools",
    "to_langchain_tools": "workflow_bridge.langgraph_tools",
}

__all__ = [
    "AgentFactory",
    "ConditionError",
    "CrewAIAdapter",
    "Diagnostic",
    "ExecutorCrewTool",
    "ExecutorToolNode",
    "LLMConfigError",
    "LocalModelServer",
    "MappedWorkflow",
    "NodeMapper",
    "REHEARSAL_NOTICE",
    "RecoveringChatModel",
    "RecoveringCrewLLM",
    "RehearsalLLM",
    "ToolBindingPlugin",
    "WorkflowCompileError",
    "WorkflowCompiler",
    "WorkflowSourceError",
    "agent_id_for",
    "build_state_schema",
    "compile_source",
    "evaluate_condition",
    "initial_state",
    "is_rehearsal",
    "llm_from_spec",
    "local_chat_model",
    "local_crew_llm",
    "make_tool_node",
    "normalize_agent",
    "recover_tool_calls",
    "resolve_llm",
    "resume_workflow",
    "run_workflow",
    "stream_run",
    "to_crewai_tool",
    "to_crewai_tools",
    "to_langchain_tool",
    "to_langchain_tools",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'workflow_bridge' has no attribute {name!r}")
    value = getattr(require(module, f"workflow_bridge.{name}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
