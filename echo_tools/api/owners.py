"""Ownership at the HTTP routes: what a principal registered, imported or stored is its own.

Only the owner or an `admin` principal may replace, delete or reuse the id of what another owns
(409 `owned` naming the owner); something with no recorded owner is the operator's. Checked here, in the
API layer, before the registry or the credential store is asked to change anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from echo_tools.api.errors import ApiError

if TYPE_CHECKING:
    from echo_tools.gate import Principal
    from echo_tools.models import ToolDef
    from echo_tools.registry import ToolRegistry

__all__ = ["owned_copy", "refuse_unowned", "refuse_unowned_provider"]


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
