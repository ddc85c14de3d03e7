"""The scope of a workflow run: made once when the run is admitted, kept with the run, restored on resume.

A run's `CallScope` (its owner's ceiling, one budget meter for the whole run, the end user) is active while
the run's graph runs (`running`): every agent's and node's tool call reads it (`scoped_context`, which
`CrewAIAdapter.context` calls in whatever thread LangGraph runs the node), and MCP servers its canvas binds
by URL are bound for that run only. The run's record keeps the scope sealed (`kept`), its budget totals
updated whenever the run pauses or ends, so a resume carries on with the owner's scope and the same budget
(`restored`), whoever decides. A `workflow` or `agent` tool call runs its sub-run under a scope `within`
its own, with the nesting its inner calls inherit (parent call, depth + 1, chain, deadline).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from echo_tools.errors import ToolTimeoutError
from echo_tools.gate import CallScope, PrincipalLookup, Seal, acting_as, current_scope
from echo_tools.mcp.bound import bound_scope
from echo_tools.models import ToolContext
from echo_tools.stored_tools import agent_permissions

__all__ = ["kept", "restored", "running", "scoped_context", "seal_of"]


def scoped_context(agent: Mapping[str, Any], context: ToolContext) -> ToolContext:
    """The context an agent's tool calls carry: under the scope of the run (or sub-run) running now, with
    what a composite call's inner calls inherit, and narrowed to the agent JSON's own `permissions`.

    Raises:
        ToolTimeoutError: the composite call that runs this workflow has already ended (deadline or cancel).
        ValueError: the agent's `permissions` list names an unknown permission.
    """
    scope = current_scope()
    if scope is not None:
        context = scope.apply(context)
        nesting = scope.nesting
        if nesting is not None:
            remaining_ms = int((nesting.deadline - time.monotonic()) * 1000)
            if nesting.stopped[0] or remaining_ms <= 0:
                raise ToolTimeoutError(
                    f"run {context.run_id!r} was stopped: its composite tool call has ended"
                )
            context = context.model_copy(
                update={
                    "timeout_ms": remaining_ms,
                    "depth": nesting.depth,
                    "call_path": list(nesting.call_path),
                    "parent_call_id": nesting.parent_call_id,
                    "trace_id": context.trace_id or nesting.trace_id,
                }
            )
    granted = agent_permissions(agent)
    if granted is not None:
        caller = context.granted_permissions
        narrowed = granted if caller is None else [p for p in granted if p in caller]
        context = context.model_copy(update={"granted_permissions": narrowed})
    return context


@contextmanager
def running(scope: CallScope, executor: Any = None) -> Iterator[CallScope]:
    """While the block runs, `scope` is the run's: its tool calls carry it, and the MCP servers its canvas
    names by URL (without the `mcp` action) bind for this run only; when it ends, `executor` forgets their
    tools (routes, cached results)."""
    with acting_as(scope), bound_scope(scope.run_id, scope.principal.name) as bound:
        try:
            yield scope
        finally:
            if executor is not None:
                for tool_id in list(bound.tools):
                    executor.forget(tool_id)


def seal_of(history: Any) -> Seal:
    """The seal of the scopes a run history keeps (`echo_tools.gate.Seal`)."""
    database = getattr(history, "db", None)
    if database is not None and hasattr(database, "pool"):  # PgRunHistory
        from echo_tools.governance.pg import database_seal

        return database_seal(database)
    path = getattr(history, "path", None)
    return Seal.in_folder(Path(path).parent) if path is not None else Seal()


def kept(scope: CallScope | None, seal: Seal) -> dict[str, Any]:
    """What a run's record keeps of its scope (nothing for a run without one)."""
    return {} if scope is None else {"scope": scope.to_record(seal)}


def restored(
    stored: Mapping[str, Any], seal: Seal, run_id: str, principals: PrincipalLookup | None = None
) -> CallScope | None:
    """The scope a run's record kept, for its resume: its owner's, with the same budget carried on (the
    narrower of the kept ceiling and the owner's now, when `principals` knows the owner); None for a run
    recorded without one.

    Raises:
        ScopeRestoreError: the kept scope was changed, is malformed, or its principal is gone.
    """
    record = stored.get("scope")
    if record is None:
        return None
    return CallScope.from_record(record, seal, principals=principals, what=f"run {run_id!r}").within(
        run_id=run_id
    )
