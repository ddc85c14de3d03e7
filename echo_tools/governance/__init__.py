"""Governance of tool calls: hooks, approvals and quotas, all run by the executor's one pipeline.

- Hooks (`hooks`): `executor.add_hook(hook)`; `before(call)` returns None, `Deny(reason)` or
  `Replace(args)`; `after(call, result)` returns None or a `ToolResult`.
- Approvals (`approvals`): `ToolDef.approval`, `ToolExecutor(approval_policy=...)`, `executor.decide`.
- Quotas (`quotas`): `Quota(limit, per_s, scope)` on a tool or on the executor.

See docs/governance.md.
"""

from __future__ import annotations

from echo_tools.governance.approvals import (
    ApprovalDecisionError,
    ApprovalRecord,
    ApprovalStore,
    MemoryApprovalStore,
    SqliteApprovalStore,
)
from echo_tools.governance.connect import Connections
from echo_tools.governance.hooks import Deny, Hook, Replace, ToolCall
from echo_tools.governance.quotas import MemoryQuotaCounter, QuotaCounter
from echo_tools.governance.stage import Governance
from echo_tools.governance.wiring import governance_stores
from echo_tools.models import Approval, Quota, QuotaScope

__all__ = [
    "Approval",
    "ApprovalDecisionError",
    "ApprovalRecord",
    "ApprovalStore",
    "Connections",
    "Deny",
    "Governance",
    "Hook",
    "MemoryApprovalStore",
    "MemoryQuotaCounter",
    "Quota",
    "QuotaCounter",
    "QuotaScope",
    "Replace",
    "SqliteApprovalStore",
    "ToolCall",
    "governance_stores",
]
