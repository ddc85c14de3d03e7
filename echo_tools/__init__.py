"""echo-tools: one tool catalogue, one executor, adapters for CrewAI and LangGraph.

The catalogue (`ToolRegistry`, `ToolDef`) and events load eagerly; the executor and ingestion helpers load
on first use, so `import echo_tools` stays fast and never imports an agent framework.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from echo_tools._version import __version__ as __version__
from echo_tools.builtin_tools import builtin_tools_dir
from echo_tools.catalogue import Catalogue
from echo_tools.egress import EgressPolicy, egress_client
from echo_tools.errors import (
    ApprovalRejectedError,
    ApprovalRequiredError,
    EgressDeniedError,
    MCPConnectionError,
    NotStoredError,
    QuotaExceededError,
    ScopeRestoreError,
    ToolBudgetError,
    ToolConfigError,
    ToolDeniedError,
    ToolDisabledError,
    ToolError,
    ToolExecutionError,
    ToolInputRejectedError,
    ToolNameConflictError,
    ToolNotFoundError,
    ToolOutputValidationError,
    ToolPermissionError,
    ToolReadOnlyError,
    ToolRegistrationError,
    ToolStorageError,
    ToolTimeoutError,
    ToolValidationError,
)
from echo_tools.events import JsonlEventLog, LoggingEventSink, MemoryEventLog, ToolEvent
from echo_tools.gate import Budget, BudgetMeter, CallScope, Grants, Principal, ToolOwnedError
from echo_tools.lookup import ToolLookup
from echo_tools.models import (
    Approval,
    Determinism,
    Quota,
    QuotaScope,
    RetryPolicy,
    SideEffect,
    ToolContext,
    ToolDef,
    ToolPermission,
    ToolResult,
    ToolSource,
    ToolStatus,
    ToolType,
)
from echo_tools.registry import ToolRegistry
from echo_tools.settings import ApiSettings
from echo_tools.storage import ToolStorage
from echo_tools.store import ToolStore
from echo_tools.stores import AgentStore, WorkflowStore

if TYPE_CHECKING:
    from echo_tools.api import create_app, make_router
    from echo_tools.call import Call
    from echo_tools.executor import ToolExecutor
    from echo_tools.governance import Deny, Replace, ToolCall
    from echo_tools.ingest import tool, tool_from_crewai, tool_from_function, tool_from_langchain
    from echo_tools.otel import OpenTelemetrySink
    from echo_tools.tool_search import search_tools_tool

_LAZY = {
    "Call": "echo_tools.call",
    "Deny": "echo_tools.governance",
    "Replace": "echo_tools.governance",
    "ToolCall": "echo_tools.governance",
    "OpenTelemetrySink": "echo_tools.otel",
    "ToolExecutor": "echo_tools.executor",
    "create_app": "echo_tools.api",
    "make_router": "echo_tools.api",
    "search_tools_tool": "echo_tools.tool_search",
    "tool": "echo_tools.ingest",
    "tool_from_crewai": "echo_tools.ingest",
    "tool_from_function": "echo_tools.ingest",
    "tool_from_langchain": "echo_tools.ingest",
}

__all__ = [
    "AgentStore",
    "ApiSettings",
    "Approval",
    "ApprovalRejectedError",
    "ApprovalRequiredError",
    "Budget",
    "BudgetMeter",
    "Call",
    "CallScope",
    "Catalogue",
    "Deny",
    "Determinism",
    "EgressDeniedError",
    "EgressPolicy",
    "Grants",
    "JsonlEventLog",
    "LoggingEventSink",
    "MCPConnectionError",
    "MemoryEventLog",
    "NotStoredError",
    "OpenTelemetrySink",
    "Principal",
    "Quota",
    "QuotaExceededError",
    "QuotaScope",
    "Replace",
    "RetryPolicy",
    "ScopeRestoreError",
    "SideEffect",
    "ToolBudgetError",
    "ToolCall",
    "ToolConfigError",
    "ToolContext",
    "ToolDef",
    "ToolDeniedError",
    "ToolDisabledError",
    "ToolError",
    "ToolEvent",
    "ToolExecutionError",
    "ToolExecutor",
    "ToolInputRejectedError",
    "ToolLookup",
    "ToolNameConflictError",
    "ToolNotFoundError",
    "ToolOutputValidationError",
    "ToolOwnedError",
    "ToolPermission",
    "ToolPermissionError",
    "ToolReadOnlyError",
    "ToolRegistrationError",
    "ToolRegistry",
    "ToolResult",
    "ToolSource",
    "ToolStatus",
    "ToolStorage",
    "ToolStorageError",
    "ToolStore",
    "ToolTimeoutError",
    "ToolType",
    "ToolValidationError",
    "WorkflowStore",
    "builtin_tools_dir",
    "create_app",
    "egress_client",
    "make_router",
    "search_tools_tool",
    "tool",
    "tool_from_crewai",
    "tool_from_function",
    "tool_from_langchain",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'echo_tools' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
