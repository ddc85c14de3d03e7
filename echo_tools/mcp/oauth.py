"""OAuth 2.1 for HTTP MCP servers through the MCP SDK's `OAuthClientProvider`, its state in the credential store.

The SDK does the protocol (protected-resource and authorization-server metadata, dynamic client
registration, PKCE, token exchange and refresh); `StoredTokens` keeps what it learns (tokens, client
registration, the token's expiry) encrypted in the `CredentialStore` as an `mcp_oauth` credential, so a
later process refreshes the token without a person. The person's part (open the authorization URL, bring
back the code) is the host's: `echo_tools.mcp.auth.set_oauth_handlers`; without it the flow stops with an
error saying so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyUrl

from echo_tools.compat.mcp import oauth_callback
from echo_tools.errors import MCPConnectionError
from echo_tools.redaction import remember_secrets

if TYPE_CHECKING:
    from echo_tools.credentials import CredentialStore

# the host's part of the flow (`echo_tools.mcp.auth.set_oauth_handlers`): show the person the authorization
# URL, then wait for the redirect's code and state
RedirectHandler = Callable[[str], Awaitable[None]]
CallbackHandler = Callable[[], Awaitable[tuple[str, str | None]]]


class StoredTokens:
    """The SDK's `TokenStorage` over one `mcp_oauth` credential (encrypted at rest with the store's key).

    Tokens stored for another server URL are never handed out.
    """

    def __init__(self, store: CredentialStore, name: str, server_url: str) -> None:
        self.store = store
        self.name = name
        self.server_url = server_url

    def __repr__(self) -> str:
        return f"StoredTokens(credential={self.name!r}, server_url={self.server_url!r})"

    async def _state(self) -> dict[str, Any]:
        state = await asyncio.to_thread(self.store.load_mcp_oauth, self.name)
        return state if state and state.get("server_url") == self.server_url else {}

    async def _update(self, fields: dict[str, Any], drop: tuple[str, ...] = ()) -> None:
        def write() -> None:
            state = self.store.load_mcp_oauth(self.name) or {}
            if state.get("server_url") != self.server_url:
                state = {}  # another server's state under this name is replaced, never mixed in
            state.update(fields, type="mcp_oauth", server_url=self.server_url)
            for key in drop:
                state.pop(key, None)
            self.store.set(self.name, state)

        await asyncio.to_thread(write)

    async def get_tokens(self) -> OAuthToken | None:
        state = await self._state()
        if "tokens" not in state:
            return None
        tokens = OAuthToken.model_validate_json(state["tokens"])
        remember_secrets(tokens.access_token, tokens.refresh_token)  # hidden wherever a server echoes them
        if "expires_at" in state:  # what is left of the lifetime, so the provider refreshes in time
            tokens.expires_in = max(0, int(state["expires_at"] - time.time()))
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        remember_secrets(tokens.access_token, tokens.refresh_token)
        fields: dict[str, Any] = {"tokens": tokens.model_dump_json(exclude_none=True)}
        if tokens.expires_in is not None:
            fields["expires_at"] = time.time() + tokens.expires_in
            await self._update(fields)
        else:
            await self._update(fields, drop=("expires_at",))

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        state = await self._state()
        if "client_info" not in state:
            return None
        return OAuthClientInformationFull.model_validate_json(state["client_info"])

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        await self._update({"client_info": client_info.model_dump_json(exclude_none=True)})


class StoredOAuthProvider(OAuthClientProvider):
    """The SDK's provider, which also knows when stored tokens expire (so it refreshes them in time)."""

    async def _initialize(self) -> None:
        # the SDK's extension point for loading state (its own client-credentials providers override it);
        # the base loads tokens but not their expiry, so an expired one would wait for a 401
        await super()._initialize()
        tokens = self.context.current_tokens
        if tokens is not None and tokens.expires_in is not None:
            self.context.update_token_expiry(tokens)


def oauth_provider(
    store: CredentialStore,
    server: str,
    config: Mapping[str, Any],
    handlers: tuple[RedirectHandler, CallbackHandler] | None,
    *,
    credential: str,
    redirect_uri: str,
) -> StoredOAuthProvider:
    """The SDK's OAuth provider for `server` (config with `url` and `oauth`), its state in `store` under the
    credential named `credential`; `redirect_uri` is where the person's browser brings the code back."""
    oauth = config.get("oauth") or {}
    url = str(config["url"])
    scopes = oauth.get("scopes") or []
    metadata = OAuthClientMetadata(
        client_name=oauth.get("client_name", "echo-tools"),
        redirect_uris=[AnyUrl(redirect_uri)],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(scopes) or None,
    )
    name = credential
    redirect_handler, callback_handler = handlers or (_needs_a_person(server, url, name), None)
    return StoredOAuthProvider(
        server_url=url,
        client_metadata=metadata,
        storage=StoredTokens(store, name, url),
        redirect_handler=redirect_handler,
        callback_handler=oauth_callback(callback_handler or _never_called),
    )


def _needs_a_person(server: str, url: str, name: str) -> RedirectHandler:
    async def refuse(authorization_url: str) -> None:
        raise MCPConnectionError(
            f"MCP server {server!r} ({url!r}) needs OAuth authorization by a person, and no stored token "
            f"(credential {name!r}) could be used or refreshed: run `echo-tools mcp login {server}`, or let "
            "the host supply the browser step with echo_tools.mcp.auth.set_oauth_handlers()"
        )

    return refuse


async def _never_called() -> tuple[str, str | None]:
    raise MCPConnectionError("OAuth callback without a redirect handler")
