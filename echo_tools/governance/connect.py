"""A per-user OAuth 2.1 connection: the end user authorizes, their token becomes their own credential.

`Connections.start(store, name, user_id, server_url, redirect_uri)` reads the authorization server's
metadata (RFC 8414, at the server URL's origin), registers a client (RFC 7591), and answers the
authorization URL (PKCE S256, a random `state`) the user opens; `finish(state, code)` exchanges the code
the authorization server sent back to `redirect_uri` for a token (one request, PKCE verifier, under the
egress policy) and stores it as the user's own credential `name` (`CredentialStore.set(...,
user_id=user_id)`): `{"type": "bearer"}` when the server gave no refresh token, else `{"type":
"oauth_user"}` holding the refresh token too (a secret, never shown). A pending connection lives in this
object, for `PENDING_TTL_S` seconds, and is finished at most once, by the principal that started it (or an
admin), and never over a user's credential another principal owns (`OwnedCredentialError`). No secret
appears in an error.

`echo_tools.credentials.renewal` renews the access token of an `oauth_user` credential before a call
sends it, once it has expired, with that same user's refresh token.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from echo_tools.credentials.fields import CredentialError
from echo_tools.credentials.per_user import check_user_id, user_key
from echo_tools.credentials.renewal import expiry
from echo_tools.errors import ToolExecutionError

if TYPE_CHECKING:
    from echo_tools.credentials import CredentialStore
    from echo_tools.egress import EgressPolicy
    from echo_tools.gate import Principal

__all__ = ["Connections", "OwnedCredentialError", "refuse_owned_slot"]


class OwnedCredentialError(CredentialError):
    """The connection would replace, or finish, what another principal owns (`owner` names it)."""

    def __init__(self, message: str, *, owner: str) -> None:
        super().__init__(message, field="owner")
        self.owner = owner


def refuse_owned_slot(store: CredentialStore, name: str, user_id: str, principal: Principal | None) -> None:
    """`OwnedCredentialError` when `user_id`'s own credential `name` exists and `principal` (None: the
    operator, in-process) is neither its owner nor an admin: a connection never takes over another's slot."""
    key = user_key(name, user_id)
    if principal is None or key not in store:
        return
    owner = store.owner_of(key) or "operator"
    if not principal.owns(owner):
        raise OwnedCredentialError(
            f"credential {name!r} of user {user_id!r} is owned by {owner!r}; principal {principal.name!r} may "
            "not replace it (only its owner or an admin may)",
            owner=owner,
        )


PENDING_TTL_S = 600.0
MAX_ANSWER_BYTES = 64 * 1024


@dataclass
class _Pending:
    name: str
    user_id: str
    owner: str | None
    token_url: str
    client_id: str
    client_secret: str | None
    verifier: str
    redirect_uri: str
    resource: str
    started: float


class Connections:
    """The OAuth connections under way (started, not yet finished) of one process."""

    def __init__(self, policy: EgressPolicy | None = None) -> None:
        self.policy = policy
        self._pending: dict[str, _Pending] = {}
        self._lock = threading.Lock()

    async def start(
        self,
        name: str,
        user_id: str,
        server_url: str,
        redirect_uri: str,
        *,
        scopes: list[str] | None = None,
        owner: str | None = None,
    ) -> dict[str, str]:
        """`{"authorization_url", "state"}` for `user_id` to connect credential `name` at `server_url`."""
        check_user_id(user_id)
        for field, url in (("server_url", server_url), ("redirect_uri", redirect_uri)):
            if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
                raise CredentialError(f"{field} must be an http(s) URL, got {url!r:.200}", field=field)
        parts = urlsplit(server_url)
        issuer = f"{parts.scheme}://{parts.netloc}"
        meta = await self._json("GET", f"{issuer}/.well-known/oauth-authorization-server", name)
        endpoints = {k: meta.get(k) for k in ("authorization_endpoint", "token_endpoint")}
        missing = [k for k, v in endpoints.items() if not isinstance(v, str)]
        if missing:
            raise self._fail(name, issuer, f"names no {missing[0]} in its metadata")
        client = await self._register(name, meta, redirect_uri, scopes)
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=")
        state = secrets.token_urlsafe(24)
        query = {
            "response_type": "code",
            "client_id": client["client_id"],
            "redirect_uri": redirect_uri,
            "code_challenge": challenge.decode(),
            "code_challenge_method": "S256",
            "state": state,
            "resource": server_url,
        }
        if scopes:
            query["scope"] = " ".join(scopes)
        pending = _Pending(
            name, user_id, owner, str(endpoints["token_endpoint"]), str(client["client_id"]),
            client.get("client_secret"), verifier, redirect_uri, server_url, time.monotonic(),
        )  # fmt: skip
        with self._lock:
            self._pending = {k: p for k, p in self._pending.items() if not _expired(p)}
            self._pending[state] = pending
        return {
            "authorization_url": f"{endpoints['authorization_endpoint']}?{urlencode(query)}",
            "state": state,
        }

    def pending_user(self, state: str) -> str | None:
        """The user a pending connection is for (None: unknown or expired)."""
        with self._lock:
            pending = self._pending.get(state)
        return None if pending is None or _expired(pending) else pending.user_id

    async def finish(
        self, store: CredentialStore, name: str, state: str, code: str, *, principal: Principal | None = None
    ) -> dict[str, str]:
        """Exchange `code` for the token and store it as the user's credential `name`; once per `state`.

        `principal` (None: the operator, in-process) must be the one that started the connection, or an
        admin, and own the user's credential `name` when there is one already.

        Raises:
            CredentialError: the state is unknown, finished or expired (`field` "state").
            OwnedCredentialError: another principal started the connection, or owns the user's credential.
        """
        with self._lock:
            pending = self._pending.get(state)
            if pending is None or _expired(pending) or pending.name != name:
                raise CredentialError(
                    f"no connection of credential {name!r} is under way with this state "
                    "(unknown, finished already, or older than 10 minutes): connect again",
                    field="state",
                )
            starter = pending.owner or "operator"
            if principal is not None and not principal.owns(starter):  # the state stays the starter's
                raise OwnedCredentialError(
                    f"the connection of credential {name!r} for user {pending.user_id!r} was started by "
                    f"{starter!r}; principal {principal.name!r} may not finish it",
                    owner=starter,
                )
            del self._pending[state]  # at most once, whatever the exchange answers
        # checked again here (the user's credential may have been stored since the connection started)
        await asyncio.to_thread(refuse_owned_slot, store, name, pending.user_id, principal)
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": pending.redirect_uri,
            "client_id": pending.client_id,
            "code_verifier": pending.verifier,
            "resource": pending.resource,
        }
        if pending.client_secret:
            form["client_secret"] = pending.client_secret
        answer = await self._json("POST", pending.token_url, name, data=form)
        token = answer.get("access_token")
        if not isinstance(token, str) or not token:
            raise self._fail(name, pending.token_url, "answered no access_token")
        secret: dict[str, Any] = {"type": "bearer", "token": token}
        refresh = answer.get("refresh_token")
        if isinstance(refresh, str) and refresh:  # kept, to renew the access token once it expires
            secret = {
                "type": "oauth_user", "token": token, "refresh_token": refresh, "token_url": pending.token_url,
                "client_id": pending.client_id, "resource": pending.resource, **expiry(answer),
                **({"client_secret": pending.client_secret} if pending.client_secret else {}),
            }  # fmt: skip
        stored = await asyncio.to_thread(
            store.set, name, secret, owner=pending.owner, user_id=pending.user_id
        )
        return {**stored, "user_id": pending.user_id}

    async def _register(
        self, name: str, meta: dict[str, Any], redirect_uri: str, scopes: list[str] | None
    ) -> dict[str, Any]:
        url = meta.get("registration_endpoint")
        if not isinstance(url, str):
            raise self._fail(name, str(meta.get("issuer")), "offers no dynamic client registration")
        body: dict[str, Any] = {
            "client_name": "echo-tools",
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
        }
        if scopes:
            body["scope"] = " ".join(scopes)
        client = await self._json("POST", url, name, json=body)
        if not isinstance(client.get("client_id"), str):
            raise self._fail(name, url, "registered no client_id")
        return client

    async def _json(self, method: str, url: str, name: str, **kwargs: Any) -> dict[str, Any]:
        """One request through the egress client (every address checked, the body decoded within
        `MAX_ANSWER_BYTES`), its JSON answer."""
        import httpx

        from echo_tools.egress import EgressPolicy, egress_client

        policy = self.policy or EgressPolicy()
        client = egress_client(policy, max_body_bytes=MAX_ANSWER_BYTES, follow_redirects=False, timeout=30.0)
        async with client as http:
            try:
                answer = await http.request(method, url, headers={"Accept": "application/json"}, **kwargs)
                body = answer.content
            except httpx.DecodingError as exc:  # past MAX_ANSWER_BYTES, or an encoding refused
                raise self._fail(name, url, f"answered more than {MAX_ANSWER_BYTES} bytes ({exc})") from exc
            except httpx.HTTPError as exc:
                raise self._fail(name, url, f"failed: {type(exc).__name__}") from exc
        if answer.status_code >= 400:
            raise self._fail(name, url, f"answered HTTP {answer.status_code}")
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise self._fail(name, url, "answered no JSON object")
        return data

    @staticmethod
    def _fail(name: str, url: str, reason: str) -> ToolExecutionError:
        return ToolExecutionError(
            f"credential {name!r}: the OAuth connection's request to {url!r} {reason}", field="credential"
        )


def _expired(pending: _Pending) -> bool:
    return time.monotonic() - pending.started > PENDING_TTL_S


def connect_from_terminal(
    store: CredentialStore,
    name: str,
    user_id: str,
    server_url: str,
    redirect_uri: str,
    *,
    policy: EgressPolicy | None = None,
    scopes: list[str] | None = None,
    ask: Any = input,
    say: Any = print,
) -> dict[str, str]:
    """`echo-tools credentials connect`: say the authorization URL, ask for the URL the browser was sent
    back to (or its code), finish the connection; one process, so the pending state never leaves it."""
    from urllib.parse import parse_qs

    connections = Connections(policy)

    async def flow() -> dict[str, str]:
        started = await connections.start(name, user_id, server_url, redirect_uri, scopes=scopes)
        say(f"Open this URL as user {user_id!r} and authorize:\n{started['authorization_url']}")
        answer = (await asyncio.to_thread(ask, "Paste the URL you were sent back to (or the code): ")).strip()
        query = parse_qs(urlsplit(answer).query) if "?" in answer else {}
        code, state = (query.get("code") or [answer])[0], (query.get("state") or [started["state"]])[0]
        if state != started["state"]:
            raise CredentialError(
                "the URL you were sent back to carries another state: it is not this connection's",
                field="state",
            )
        return await connections.finish(store, name, state, code)

    return asyncio.run(flow())
