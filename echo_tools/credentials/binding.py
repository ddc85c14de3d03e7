"""Where credentials meet tools: the check of a tool naming one at registration, and the hook the `api`
backend calls to authenticate a request (`credential_for`).

A tool registered over HTTP may name only a credential that exists and lists the tool's host (checked at
registration, and again at call time: the credential may have changed since). Every call of every tool
type goes through `CredentialStore.apply`, which sends a credential only to its `hosts` (fixed to the host
of the first tool it was bound to when it lists none).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from echo_tools.credentials.fields import NAME_PATTERN, CredentialError

if TYPE_CHECKING:
    from echo_tools.backends.base import BackendHost
    from echo_tools.credentials.store import AppliedCredential, CredentialStore
    from echo_tools.models import ToolDef

logger = logging.getLogger("echo_tools.credentials")


def check_tool_credential(tool: ToolDef, store: CredentialStore | None) -> None:
    """At registration: a credential reference must be a name. A `remote` tool's credential must exist
    and list the tool's host; for the operator's own tools an unknown one is a warning (the credential may
    be added after the tools that use it; the call fails naming it until then)."""
    from echo_tools.errors import ToolRegistrationError
    from echo_tools.models import ToolSource

    name = tool.execution_config.get("credential") if isinstance(tool.execution_config, dict) else None
    if name is None:
        return
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ToolRegistrationError(
            f"Tool {tool.tool_id!r}: execution_config.credential must be a credential name, got {name!r:.60}",
            tool_id=tool.tool_id,
            field="execution_config.credential",
        )
    if store is not None and tool.source == ToolSource.REMOTE:
        refusal = store.refusal_for(name, str(tool.execution_config.get("url", "")))
        if refusal:
            raise ToolRegistrationError(
                f"Tool {tool.tool_id!r}: {refusal}", tool_id=tool.tool_id, field="execution_config.credential"
            )
    if store is not None and name not in store and name not in store.warned:
        store.warned.add(name)  # once per name: an import registers many tools naming the same one
        logger.warning(
            "Tool %r names credential %r, which does not exist yet; its calls fail until "
            "`echo-tools credentials set %s ...` adds it",
            tool.tool_id,
            name,
            name,
        )


async def credential_for(
    executor: BackendHost, tool: ToolDef, url: str, client: Any = None, user_id: str | None = None
) -> AppliedCredential | None:
    """The `api` backend's hook: what `tool`'s `execution_config.credential` adds to a request to `url`.

    A call made for an end user (`user_id`) uses that user's own credential of the name when there is
    one, else the shared one; never another user's (`credentials.per_user`).
    """
    name = tool.execution_config.get("credential")
    if not name:
        return None
    store = executor.registry.credentials
    if user_id is not None:
        from echo_tools.credentials.per_user import user_key

        own = user_key(name, user_id)
        if own in store:
            name = own
    from echo_tools.models import ToolSource

    if tool.source == ToolSource.REMOTE:  # checked at registration too, but the credential may be newer
        refusal = store.refusal_for(name, url)
        if refusal:
            raise CredentialError(
                f"Tool {tool.tool_id!r}: {refusal}", tool_id=tool.tool_id, field="execution_config.credential"
            )
    owner = store.owner_of(name)
    if owner is not None and tool.owner is not None and tool.owner != owner:
        # the tool's owner may not lend itself another principal's secret (checked at registration too)
        raise CredentialError(
            f"Tool {tool.tool_id!r} (owner {tool.owner!r}) may not use credential {name!r}: it is owned by "
            f"{owner!r}",
            tool_id=tool.tool_id,
            field="execution_config.credential",
        )
    if store.type_of(name) == "oauth_user":  # a user's OAuth connection: renewed once its token expired
        from echo_tools.credentials.renewal import renew

        await renew(store, name, policy=executor.egress)
    return await store.apply(name, url, tool_id=tool.tool_id, egress=executor.egress, client=client)
