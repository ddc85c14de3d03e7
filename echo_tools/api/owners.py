"""Ownership at the HTTP routes: what a principal registered, imported or stored is its own.

Only the owner or an `admin` principal may replace, delete or reuse the id of what another owns
(409 `owned` naming the owner); something with no recorded owner is the operator's. Checked here, in the
API layer, before the registry or the credential store is asked to change anything. Reads are owned too:
`viewer(principal)` is the name a read filters by (None: an admin, who sees everything), and a call may
name as its `run_id` only a run its principal owns (`refuse_foreign_run`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from echo_tools.api.errors import ApiError

if TYPE_CHECKING:
    from echo_tools.gate import Principal
    from echo_tools.models import ToolDef
    from echo_tools.registry import ToolRegistry

__all__ = [
    "owned_copy",
    "refuse_foreign_run",
    "refuse_unowned",
    "refuse_unowned_provider",
    "run_owner",
    "viewer",
]


def viewer(principal: Principal) -> str | None:
    """The principal name a read shows the data of (its runs, calls, approvals); None: an admin sees all."""
    return None if principal.grants.admin else principal.name


_OWNERS: weakref.WeakKeyDictionary[Any, dict[str, str]] = weakref.WeakKeyDictionary()
_OWNERS_KEPT = 10_000  # run owners remembered per history (an owner never changes once known)


def run_owner(history: Any, run_id: str) -> str | None:
    """Who owns run `run_id` (or the run it is a sub-run of, `RUN/<tool>/<hex>`): the principal that
    started the recorded run, else the principal whose call first named the id; None: nobody yet.

    Reads the history (call it on a worker thread) the first time a run's owner is asked for."""
    root = run_id.split("/", 1)[0]
    try:
        known = _OWNERS.setdefault(history, {})
    except TypeError:  # a history that cannot be weakly referenced: asked every time
        known = {}
    for candidate in dict.fromkeys((root, run_id)):
        owner = known.get(candidate)
        if owner is not None:
            return owner
        record = history.run(candidate)
        if record is not None:
            owner = str(record["owner"])
        else:
            first = history.events(run_id=candidate, limit=1)
            owner = (first[0].principal or "operator") if first else None
        if owner is not None:
            if len(known) >= _OWNERS_KEPT:
                known.clear()
            known[candidate] = owner
            return owner
    return None


def refuse_foreign_run(
    principal: Principal, history: Any, run_id: str, field: str = "run_id", doing: str = "reuse"
) -> None:
    """409 `owned` naming the owner when `run_id` is a run another principal owns (an admin may name any)."""
    if principal.grants.admin or history is None:
        return
    owner = run_owner(history, run_id)
    if owner is None or owner == principal.name:
        return
    raise ApiError(
        409,
        "owned",
        f"run {run_id!r} is owned by {owner!r}; principal {principal.name!r} may not {doing} it (only its "
        "owner or an admin may)",
        field=field,
    )


def refuse_unowned(
    principal: Principal, owner: str | None, what: str, *, field: str, tool_id: str | None = None
) -> None:
    """409 `owned` when `what` (owned by `owner`, None: the operator) is not `principal`'s to change."""
    if principal.owns(owner):
        return
    raise ApiError(
        409,
        "owned",
        f"{what} is owned by {owner or 'operator'!r}; principal {principal.name!r} may not replace, delete "
        "or reuse it (only its owner or an admin may)",
        tool_id=tool_id,
        field=field,
    )


def refuse_unowned_provider(principal: Principal, registry: ToolRegistry, provider: str) -> None:
    """409 `owned` when tools imported under `provider` belong to another principal."""
    from echo_tools.models import ToolSource

    for tool in registry.list_by_tags([f"provider:{provider}"]):
        if tool.source == ToolSource.OPENAPI:
            refuse_unowned(
                principal, tool.owner, f"Provider {provider!r}", field="provider", tool_id=tool.tool_id
            )


def owned_copy(registry: ToolRegistry, tool: ToolDef, principal: Principal) -> ToolDef:
    """`tool` owned by `principal`, after checking it may replace the tool of that id and lend the credential
    the tool names (409 `owned` naming the owner otherwise)."""
    current = registry.get(tool.tool_id)
    if current is not None:
        refuse_unowned(
            principal, current.owner, f"Tool {tool.tool_id!r}", field="tool_id", tool_id=tool.tool_id
        )
    name = tool.execution_config.get("credential")
    if isinstance(name, str) and name in registry.credentials:
        owner = registry.credentials.owner_of(name)
        refuse_unowned(principal, owner, f"Credential {name!r}", field="execution_config.credential")
    return tool.model_copy(update={"owner": principal.name})
