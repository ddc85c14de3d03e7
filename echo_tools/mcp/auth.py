"""Authentication of HTTP MCP servers: a stored credential, OAuth 2.1 through the MCP SDK, or a host's
`httpx.Auth`.

A server's config names at most one of `credential` (a `CredentialStore` name: bearer, api_key in a header,
basic, oauth2_client_credentials, applied to every request) or `oauth` (the SDK's `OAuthClientProvider`,
its tokens and client registration kept in the store, see `echo_tools.mcp.oauth`). A host may instead give
any `httpx.Auth` for a server (`registry.add_mcp_server(name, config, auth=...)`), used as is.
`connection_auth` is what a session asks for when it builds its HTTP client.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import AsyncGenerator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from echo_tools.compat.mcp import HTTP_LIBRARY, http_module
from echo_tools.credentials.fields import NAME_PATTERN, CredentialError
from echo_tools.errors import MCPConnectionError, ToolConfigError, ToolError
from echo_tools.models import ToolSource

if TYPE_CHECKING:
    from echo_tools.catalogue import Catalogue
    from echo_tools.credentials import CredentialStore
    from echo_tools.egress import EgressPolicy
    from echo_tools.mcp.oauth import CallbackHandler, RedirectHandler
    from echo_tools.models import ToolDef

logger = logging.getLogger("echo_tools.mcp")

# the credential types that can authenticate an MCP server's connection
MCP_CREDENTIAL_TYPES = ("bearer", "api_key", "basic", "oauth2_client_credentials")
OAUTH_KEYS = ("scopes", "client_name", "redirect_uri", "credential")
DEFAULT_REDIRECT_URI = "http://127.0.0.1:33418/callback"

# per registry: what the host supplied in this process (never stored)
_HOST_AUTH: weakref.WeakKeyDictionary[Any, dict[str, httpx.Auth]] = weakref.WeakKeyDictionary()
_HANDLERS: weakref.WeakKeyDictionary[Any, tuple[RedirectHandler, CallbackHandler]] = (
    weakref.WeakKeyDictionary()
)


class ServerConfig(dict[str, Any]):
    """A server's stored config as a connection receives it, with what authenticates it in this process.

    It compares equal to the plain config, and what is attached never reaches a file.
    """

    credentials: CredentialStore | None = None
    auth: httpx.Auth | None = None
    handlers: tuple[RedirectHandler, CallbackHandler] | None = None


def bind(registry: Catalogue, name: str, config: Mapping[str, Any]) -> ServerConfig:
    """`config` with the registry's credential store, the host's auth and OAuth handlers attached."""
    bound = ServerConfig(config)
    if config.get("transport", "stdio") != "stdio":
        bound.credentials = registry.credentials
        bound.auth = _HOST_AUTH.get(registry, {}).get(name)
        bound.handlers = _HANDLERS.get(registry)
    return bound


def set_server_auth(registry: Catalogue, name: str, auth: httpx.Auth | None) -> None:
    """Use `auth` for server `name`'s connections in this process (None: stop): an `httpx.Auth` under the
    MCP SDK 1.x, an `httpx2.Auth` under 2.x (the client the SDK's transports take)."""
    if auth is not None and not isinstance(auth, http_module().Auth):
        raise ToolConfigError(
            f"MCP server {name!r}: auth must be an {HTTP_LIBRARY}.Auth (the installed MCP SDK's HTTP client), "
            f"got {type(auth).__module__}.{type(auth).__name__}",
            field="auth",
        )
    servers = _HOST_AUTH.setdefault(registry, {})
    if auth is None:
        servers.pop(name, None)
    else:
        servers[name] = auth


def set_oauth_handlers(
    registry: Catalogue, redirect_handler: RedirectHandler, callback_handler: CallbackHandler
) -> None:
    """The host's interactive part of OAuth 2.1 for every server of `registry` configured with `oauth`.

    Args:
        redirect_handler: shows the person the authorization URL (opens a browser, renders a link).
        callback_handler: waits for the redirect back and returns `(code, state)` from it.
    """
    _HANDLERS[registry] = (redirect_handler, callback_handler)


# -- config checks -----------------------------------------------------------------------------------


def check_auth_config(name: str, config: dict[str, Any]) -> None:
    """Check `credential` / `oauth` of a server's config (in place: `oauth.scopes` becomes a list).

    Raises:
        ToolConfigError: a value is unusable; the message names the server and the field.
    """

    def fail(key: str, message: str) -> ToolConfigError:
        return ToolConfigError(f"MCP server {name!r}: {message}", field=f"mcpServers.{name}.{key}")

    if "credential" not in config and "oauth" not in config:
        return
    if config.get("transport") == "stdio":
        key = "credential" if "credential" in config else "oauth"
        raise fail(key, f"'{key}' is for HTTP servers; a stdio server takes its secrets in 'env'")
    if "credential" in config and "oauth" in config:
        raise fail("credential", "give either 'credential' or 'oauth', not both")
    if "credential" in config:
        credential = config["credential"]
        if not isinstance(credential, str) or not NAME_PATTERN.fullmatch(credential):
            raise fail("credential", f"'credential' must be a credential name, got {credential!r:.60}")
        return
    oauth = config["oauth"]
    if oauth is True:
        oauth = config["oauth"] = {}
    if not isinstance(oauth, Mapping):
        raise fail("oauth", f"'oauth' must be an object (or true), got {oauth!r:.80}")
    unknown = sorted(set(oauth) - set(OAUTH_KEYS))
    if unknown:
        raise fail(f"oauth.{unknown[0]}", f"oauth has unknown field {unknown[0]!r}; it takes {OAUTH_KEYS}")
    oauth = config["oauth"] = dict(oauth)
    scopes = oauth.get("scopes", [])
    if isinstance(scopes, str):
        scopes = oauth["scopes"] = scopes.split()
    if not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes):
        raise fail("oauth.scopes", f"oauth.scopes must be a list of strings, got {scopes!r:.80}")
    for key in ("client_name", "redirect_uri"):
        if key in oauth and (not isinstance(oauth[key], str) or not oauth[key]):
            raise fail(f"oauth.{key}", f"oauth.{key} must be a non-empty string, got {oauth[key]!r:.80}")
    redirect = oauth.get("redirect_uri", DEFAULT_REDIRECT_URI)
    if not redirect.startswith(("http://", "https://")):
        raise fail("oauth.redirect_uri", f"oauth.redirect_uri must be an http(s) URL, got {redirect!r}")
    store_name = oauth.get("credential")
    if store_name is not None and (not isinstance(store_name, str) or not NAME_PATTERN.fullmatch(store_name)):
        raise fail("oauth.credential", f"oauth.credential must be a credential name, got {store_name!r:.60}")


def oauth_credential_name(name: str, config: Mapping[str, Any]) -> str:
    """The credential the server's OAuth tokens are kept in (`oauth.credential`, default `mcp-oauth-<name>`)."""
    oauth = config.get("oauth")
    chosen = oauth.get("credential") if isinstance(oauth, Mapping) else None
    return chosen if isinstance(chosen, str) else f"mcp-oauth-{name}"


def check_credential_type(server: str, credential: str, kind: str | None, store: CredentialStore) -> None:
    """Raise `CredentialError` when the stored credential cannot authenticate an MCP server."""
    field = f"mcpServers.{server}.credential"
    if kind is not None and kind not in MCP_CREDENTIAL_TYPES:
        raise CredentialError(
            f"MCP server {server!r}: credential {credential!r} is of type {kind!r}, which cannot "
            f"authenticate an MCP server (use one of {list(MCP_CREDENTIAL_TYPES)}, or 'oauth' in the config)",
            field=field,
        )
    if kind == "api_key" and store.api_key_in(credential) == "query":
        raise CredentialError(
            f"MCP server {server!r}: credential {credential!r} puts its key in the query string; an MCP "
            'server takes credentials in headers only (store it with "in": "header")',
            field=field,
        )


def check_registration(registry: Catalogue, name: str, config: Mapping[str, Any]) -> None:
    """At registration: a credential of the wrong type is refused; a missing one is a warning."""
    if "oauth" in config:
        check_oauth_credential(registry.credentials, name, config)
    credential = config.get("credential")
    if not isinstance(credential, str):
        return
    store = registry.credentials
    kind = store.type_of(credential)
    if kind is None:
        if credential not in store.warned:
            store.warned.add(credential)
            logger.warning(
                "MCP server %r names credential %r, which does not exist yet; connecting fails until "
                "`echo-tools credentials set %s ...` adds it",
                name,
                credential,
                credential,
            )
        return
    check_credential_type(name, credential, kind, store)


def check_oauth_credential(store: CredentialStore, server: str, config: Mapping[str, Any]) -> None:
    """Raise `CredentialError` when the server's OAuth tokens could not be kept: the store's key is
    missing, or the name they go to holds another type."""
    store.check_key()  # before a person authorizes, not after
    name = oauth_credential_name(server, config)
    kind = store.type_of(name)
    if kind not in (None, "mcp_oauth"):
        raise CredentialError(
            f"MCP server {server!r}: its OAuth tokens would be kept in credential {name!r}, which is of "
            f"type {kind!r}; name another with oauth.credential",
            field=f"mcpServers.{server}.oauth.credential",
        )


def tool_session(tool: ToolDef, server: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The session a call of `tool` uses: its server's, or, when the tool names a credential of its own
    (`execution_config.credential`), a session of its own authenticated with it (`<server>@<credential>`).

    Raises:
        ToolConfigError: the tool names a credential but its server is started as a process (stdio).
    """
    name = tool.execution_config.get("credential")
    if not name or name == config.get("credential"):
        return server, config
    if config.get("transport", "stdio") == "stdio":
        raise ToolConfigError(
            f"Tool {tool.tool_id!r}: execution_config.credential {name!r} authenticates HTTP MCP servers "
            f"only; server {server!r} is started as a process (give it secrets in 'env')",
            tool_id=tool.tool_id,
            field="execution_config.credential",
        )
    store = config.credentials if isinstance(config, ServerConfig) else None
    if store is not None and tool.source == ToolSource.REMOTE:
        # registered over HTTP: its credential may go only to the hosts it lists (checked again now, as it
        # may have been created after the tool, without any)
        refusal = store.refusal_for(name, str(config.get("url", "")))
        if refusal:
            raise ToolConfigError(
                f"Tool {tool.tool_id!r}: {refusal}", tool_id=tool.tool_id, field="execution_config.credential"
            )
    own = ServerConfig({**{k: v for k, v in config.items() if k != "oauth"}, "credential": name})
    if isinstance(config, ServerConfig):
        own.credentials, own.handlers = config.credentials, config.handlers
    return f"{server}@{name}", own


# -- at connect time ---------------------------------------------------------------------------------


async def connection_auth(server: str, config: Mapping[str, Any], egress: EgressPolicy) -> httpx.Auth | None:
    """The `httpx.Auth` for a connection to `server` (None: the config needs none or was not bound).

    Raises:
        CredentialError: the named credential does not exist or has a type an MCP server cannot use.
        MCPConnectionError: an OAuth2 token could not be fetched (the server, URLs and credential named).
    """
    if not isinstance(config, ServerConfig):
        return None
    if config.auth is not None:
        return config.auth
    store = config.credentials
    if store is None:
        return None
    if "credential" in config:
        auth = CredentialAuth(store, config["credential"], server, config["url"], egress)
        await auth.prepare()
        return auth
    if "oauth" in config:
        from echo_tools.mcp.oauth import oauth_provider

        check_oauth_credential(store, server, config)
        provider = oauth_provider(
            store,
            server,
            config,
            config.handlers,
            credential=oauth_credential_name(server, config),
            redirect_uri=str((config.get("oauth") or {}).get("redirect_uri", DEFAULT_REDIRECT_URI)),
        )
        return provider  # its requests (metadata, registration, token) go through the egress client too
    return None


class CredentialAuth(http_module().Auth):  # type: ignore[misc]  # httpx.Auth, or httpx2.Auth under mcp 2.x
    """A stored credential on every request to the server's origin; an OAuth2 client-credentials token
    the server refuses (401) is fetched again once."""

    def __init__(
        self, store: CredentialStore, name: str, server: str, url: str, egress: EgressPolicy
    ) -> None:
        self.store, self.name, self.server, self.url, self.egress = store, name, server, url, egress
        self.kind: str | None = None

    def __repr__(self) -> str:
        return f"CredentialAuth(server={self.server!r}, credential={self.name!r})"

    async def prepare(self) -> None:
        """Check the credential now and fetch its first token, so a failure names it at connect time."""
        self.kind = self.store.type_of(self.name)
        if self.kind is None:
            known = [c["name"] for c in self.store.list()]
            raise CredentialError(
                f"MCP server {self.server!r}: credential {self.name!r} does not exist; add it with "
                f"`echo-tools credentials set {self.name} ...` (known: {known or 'none'})",
                field=f"mcpServers.{self.server}.credential",
            )
        check_credential_type(self.server, self.name, self.kind, self.store)
        await self._headers(str(self.url))

    async def _headers(self, url: str) -> dict[str, str]:
        try:
            applied = await self.store.apply(self.name, self.url, egress=self.egress)
        except CredentialError:
            raise
        except ToolError as exc:  # the token endpoint failed: say which server was being connected
            raise MCPConnectionError(
                f"MCP server {self.server!r} ({self.url!r}) cannot be authenticated: {exc.message}"
            ) from exc
        headers, _ = applied.add_to(url, {}, {})  # nothing for another origin
        return headers

    def sync_auth_flow(self, request: httpx.Request) -> Any:
        raise RuntimeError("CredentialAuth works with httpx.AsyncClient only")

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        request.headers.update(await self._headers(str(request.url)))
        response = yield request
        if response.status_code == 401 and self.kind == "oauth2_client_credentials":
            self.store.forget_token(self.name)  # revoked or expired early: one fresh token, one retry
            request.headers.update(await self._headers(str(request.url)))
            response = yield request
        if response.status_code == 401:
            raise MCPConnectionError(
                f"MCP server {self.server!r} ({self.url!r}) refused credential {self.name!r} (HTTP 401)"
            )
