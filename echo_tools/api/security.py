"""Security of the HTTP API: the API key check, the `Host` check, the request body size limit, CORS.

Imported by `echo_tools.api` only (it needs Starlette). The key check is a route dependency (so it holds
when the router is mounted into another app); the body limit is a pure ASGI middleware (it must see the
body before any route reads it), backed by a Content-Length check in the same dependency for routers
mounted without the middleware. Without a key, only requests whose `Host` is a loopback name are
answered: a web page whose own name rebinds to 127.0.0.1 (DNS rebinding) sends its own name as `Host`.
A keyless server also refuses what any web page the local browser opens can send cross-site without a
preflight: a state-changing request with a body that is not JSON (415: `text/plain`, a form) or from an
`Origin` that is neither the server's own nor a configured CORS origin (403).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from echo_tools.api.errors import ApiError, error_body
from echo_tools.gate import ACTIONS, OPERATOR, PUBLIC, READ, Grants, Principal, hash_key
from echo_tools.models import ToolPermission
from echo_tools.settings import is_loopback_host

if TYPE_CHECKING:
    from fastapi import FastAPI

    from echo_tools.settings import ApiSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def presented_key(headers: Any) -> str | None:
    """The key a request carries: `X-API-Key`, else `Authorization: Bearer <key>`."""
    key = headers.get("x-api-key")
    if key:
        return str(key)
    auth = headers.get("authorization") or ""
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


def host_name(host: str) -> str:
    """`"127.0.0.1:8765"` -> `"127.0.0.1"`, `"[::1]:80"` -> `"::1"`, `"LocalHost."` -> `"localhost"`."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    name, _, port = host.rpartition(":")
    return name if name and port.isdigit() else host


def host_refusal(host: str | None) -> ApiError | None:
    """The 421 answer for a keyless server asked under a `Host` that is not a loopback name, else None."""
    if host is not None and host.strip() and is_loopback_host(host_name(host)):
        return None
    return ApiError(
        421,
        "misdirected",
        f"Host {host!r} is not a loopback name: this server has no API key, so it answers only requests "
        "to localhost, 127.0.0.1 or [::1] (a web page whose name rebinds to this machine is refused); "
        "serve with --api-key to accept other names",
        field="headers.host",
    )


class Gatekeeper:
    """The gate of the HTTP routes: `requires(action)` is the one dependency a route declares.

    It checks the body size, finds the principal of the presented key (keys are kept as their SHA-256;
    `--api-key` is the operator; a keyless loopback server answers every caller as the operator), checks
    that its grants include the action (403 naming both), honours `X-Echo-User` only for principals that
    may act for users, and puts the principal on `request.state.principal`. Everything it needs is decided
    here, once, when the app is built.
    """

    def __init__(self, settings: ApiSettings) -> None:
        self.settings = settings
        self.limit = settings.max_body_bytes
        self.keyless = not settings.key_required and settings.api_key is None
        self.origins = frozenset(o.strip().lower().rstrip("/") for o in settings.cors_origins)
        ceiling = settings.granted_permissions
        table = {digest: _capped(p, ceiling) for digest, p in (settings.principals or {}).items()}
        self.operator = _capped(OPERATOR, ceiling)
        if settings.api_key:
            table[hash_key(settings.api_key)] = self.operator
        self.principals = table
        self._dependencies: dict[str, Any] = {}

    def principal_named(self, name: str) -> Principal | None:
        """The principal called `name` now (the operator included), or None when none is: what a deferred
        call or a paused run is restored against."""
        if name == self.operator.name:
            return self.operator
        return next((p for p in self.principals.values() if p.name == name), None)

    def requires(self, action: str) -> Any:
        """The FastAPI `Depends` a route declares (in `dependencies=[...]` or as a `Principal` parameter):
        the route runs only for a principal whose grants include `action` (`READ`: any principal,
        `PUBLIC`: no key needed)."""
        from fastapi import Depends

        return Depends(self.dependency(action))

    def dependency(self, action: str) -> Callable[[Request], Awaitable[Principal]]:
        """The dependency callable behind `requires` (one per action, so FastAPI runs it once a request)."""
        known = self._dependencies.get(action)
        if known is not None:
            return known  # type: ignore[no-any-return]
        if action not in (*ACTIONS, READ, PUBLIC):
            raise ValueError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS)}")
        gate = self

        async def gate_dependency(request: Request) -> Principal:
            return gate.admit(request, action)

        gate_dependency.gate_action = action  # type: ignore[attr-defined]  # what the route test reads
        self._dependencies[action] = gate_dependency
        return gate_dependency

    def requires_then(self, action: str, read: Callable[[Request], Awaitable[Any]]) -> Any:
        """`requires(action)` and a reading of the request in one dependency: the route gets
        `(principal, await read(request))`, `read` running only once the gate admitted the request.

        For the hot routes: FastAPI resolves each dependency with a walk of its own (parameters, cache,
        errors), so the gate and the body read as one cost what one of them did.
        """
        from fastapi import Depends

        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}; the actions are {', '.join(ACTIONS)}")
        gate = self

        async def gate_then_read(request: Request) -> tuple[Principal, Any]:
            principal = gate.admit(request, action)
            return principal, await read(request)

        gate_then_read.gate_action = action  # type: ignore[attr-defined]  # what the route test reads
        return Depends(gate_then_read)

    def admit(self, request: Request, action: str) -> Principal:
        """The principal of `request` allowed to do `action`; raises the 401/403/413/421 `ApiError`.

        Runs on every request, so it reads the raw headers once (no header object is built) and does no
        more than a key hash, one dict lookup and one set lookup; everything else was decided at start-up.
        """
        length, key, host, user = _gate_headers(request.scope["headers"])
        if length is not None and length.isdigit() and int(length) > self.limit:
            raise ApiError(
                413, "too_large", f"The request body of {length} bytes exceeds the {self.limit}-byte limit"
            )
        if action == PUBLIC:
            return self.operator if self.keyless else _ANONYMOUS
        if self.keyless:
            refusal = host_refusal(host) or browser_refusal(request.scope, self.origins)
            if refusal is not None:
                raise refusal
            principal = self.operator
        else:
            principal = self._principal(key)
        if not principal.may(action):
            allowed = ", ".join(sorted(principal.grants.actions)) or "none"
            raise ApiError(
                403,
                "permission_denied",
                f"Principal {principal.name!r} may not {action!r}: its grants allow {allowed}",
                field="action",
            )
        if user is not None:
            principal = self._acting_for(principal, user)
        request.state.principal = principal
        return principal

    def _principal(self, key: str | None) -> Principal:
        if key is None:
            raise ApiError(
                401,
                "unauthorized",
                "An API key is required: send it as 'X-API-Key' or 'Authorization: Bearer'",
            )
        principal = self.principals.get(hash_key(key))  # only hashes are kept, so no key is compared
        if principal is None:
            raise ApiError(401, "unauthorized", "The API key is wrong")
        return principal

    @staticmethod
    def _acting_for(principal: Principal, user: str) -> Principal:
        if not principal.grants.act_for_users:
            raise ApiError(
                403,
                "permission_denied",
                f"Principal {principal.name!r} may not act for end users (X-Echo-User): "
                "its grants do not include act_for_users",
                field="headers.x-echo-user",
            )
        user = user.strip()
        if not user or len(user) > 200 or not user.isprintable():
            raise ApiError(
                422, "validation", f"X-Echo-User {user!r:.80} is not a user id", field="headers.x-echo-user"
            )
        return replace(principal, user_id=user)


_ANONYMOUS = Principal("anonymous", Grants(actions=()))
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_json_type(content_type: str) -> bool:
    """`application/json` or `application/<x>+json`, parameters ignored (`; charset=utf-8`)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


def browser_refusal(scope: Scope, allowed_origins: frozenset[str]) -> ApiError | None:
    """Why a keyless server refuses a state-changing request a web page could have sent, or None.

    A page on any origin may send, with no preflight, a POST whose body is `text/plain`, a form or
    multipart, from script (`fetch`) or from a script-less `<form>`; a browser names the page's origin in
    `Origin` on every such request. So a state-changing request (any method but GET, HEAD, OPTIONS) must
    carry a JSON body or none (415 naming the content type), and an `Origin`, when sent, must be the
    server's own (its scheme and `Host`) or one of `allowed_origins` (403 naming the header). Clients that
    are not browsers (curl, httpx, the IDE) send no `Origin` and are not affected.
    """
    if scope.get("method") in _SAFE_METHODS:
        return None
    kind: bytes | None = None
    seen_origin: bytes | None = None
    seen_host = b""
    has_body = False
    for name, value in scope.get("headers", ()):  # bytes compared as they come: no decoding on the way
        if name == b"content-type":
            kind = value if kind is None else kind
        elif name == b"origin":
            seen_origin = value if seen_origin is None else seen_origin
        elif name == b"host":
            seen_host = seen_host or value
        elif name == b"content-length":
            has_body = has_body or value.strip() not in (b"", b"0")
        elif name == b"transfer-encoding":
            has_body = True
    if seen_origin is None and kind is not None and kind.startswith(b"application/json"):
        return None  # the common case: a JSON body from a client that is not a browser
    content_type = kind.decode("latin-1") if kind is not None else None
    origin = seen_origin.decode("latin-1") if seen_origin is not None else None
    host = seen_host.decode("latin-1")
    if origin is not None:
        own = f"{scope.get('scheme', 'http')}://{(host or '').strip().lower()}"
        seen = origin.strip().lower().rstrip("/")
        if seen != own and seen not in allowed_origins and "*" not in allowed_origins:
            return ApiError(
                403,
                "permission_denied",
                f"Origin {origin!r:.200} is not this server's own ({own!r}): a keyless server refuses "
                "state-changing requests a web page on another origin sent; serve with --api-key, or "
                "allow that origin with --cors-origin",
                field="headers.origin",
            )
    if (content_type is not None or has_body) and not is_json_type(content_type or ""):
        return ApiError(
            415,
            "unsupported_media_type",
            f"Content-Type {content_type!r:.200} is not application/json: a keyless server accepts only "
            "JSON bodies on state-changing requests (a web page can send text/plain or a form to it "
            "cross-site); send the body as JSON with 'Content-Type: application/json'",
            field="headers.content-type",
        )
    return None


def _gate_headers(raw: list[tuple[bytes, bytes]]) -> tuple[str | None, str | None, str | None, str | None]:
    """`(content-length, presented key, host, X-Echo-User)` of an ASGI request's raw headers, in one pass
    (the first of repeated headers, as `Request.headers.get`; the key as `presented_key` reads it)."""
    length = key = auth = host = user = None
    for name, value in raw:
        if name == b"x-api-key":
            key = key if key is not None else value.decode("latin-1")
        elif name == b"content-length":
            length = length if length is not None else value.decode("latin-1")
        elif name == b"authorization":
            auth = auth if auth is not None else value.decode("latin-1")
        elif name == b"host":
            host = host if host is not None else value.decode("latin-1")
        elif name == b"x-echo-user":
            user = user if user is not None else value.decode("latin-1")
    if not key:
        key = None
    if key is None and auth:
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            key = token.strip()
    return length, key, host, user


def _capped(principal: Principal, ceiling: tuple[str, ...] | None) -> Principal:
    """`principal` with `ApiSettings.granted_permissions` (the server-wide ceiling) applied on top."""
    if ceiling is None:
        return principal
    own = principal.grants.permissions
    kept = [p for p in ceiling if own is None or p in own]
    return replace(
        principal, grants=replace(principal.grants, permissions=tuple(ToolPermission(p) for p in kept))
    )


def make_guard(settings: ApiSettings) -> Callable[..., Awaitable[Principal]]:
    """A `READ` gate of its own for `settings` (kept for routers built before `Gatekeeper`)."""
    return Gatekeeper(settings).dependency(READ)


class BodyLimitMiddleware:
    """Answers 413 when a request body is larger than `max_bytes`, whether or not it declares its length.

    The body is read ahead (it is at most `max_bytes`) and replayed to the app; after that the original
    `receive` is used, so streaming responses still see the client's disconnect.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        # the declared length only: no dict of every header on every request
        raw = scope.get("headers", ())
        declared = next((v for k, v in raw if k.lower() == b"content-length"), b"").decode("latin-1")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, int(declared))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                # a disconnect before the body ended: let the app see it
                await self.app(scope, _replay([], message, receive), send)
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._refuse(send, size)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(chunks, None, receive), send)

    async def _refuse(self, send: Send, size: int) -> None:
        import json

        payload = json.dumps(
            error_body(
                "too_large", f"The request body ({size}+ bytes) exceeds the {self.max_bytes}-byte limit"
            )
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


class LoopbackHostMiddleware:
    """Answers 421 (the error contract) to every request whose `Host` is not a loopback name.

    Installed by `create_app` when the server has no API key, so it covers every path (health, docs,
    unknown routes), not only the routes that run the guard.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k.lower() == b"host"), None)
        refusal = host_refusal(host)
        if refusal is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})  # policy violation
            return
        import json

        payload = json.dumps(refusal.body()).encode()
        await send(
            {
                "type": "http.response.start",
                "status": refusal.status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _replay(chunks: list[bytes], pending: Message | None, receive: Receive) -> Receive:
    queue: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]
    if pending is not None:
        queue = [pending]

    async def replayed() -> Message:
        if queue:
            return queue.pop(0)
        return await receive()

    return replayed


def install_security(app: FastAPI, settings: ApiSettings) -> None:
    """The body limit, the loopback `Host` check when there is no key, and, when origins are configured,
    CORS (off by default; never `*` with credentials)."""
    if settings.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.cors_origins),
            allow_credentials=settings.cors_allow_credentials,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["content-type", "x-api-key", "authorization"],
        )
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes)
    if settings.api_key is None and not settings.key_required:
        app.add_middleware(LoopbackHostMiddleware)  # added last: runs first, before CORS answers
