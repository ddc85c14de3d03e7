"""Security of the HTTP API: the API key check, the `Host` check, the request body size limit, CORS.

Imported by `echo_tools.api` only (it needs Starlette). The key check is a route dependency (so it holds
when the router is mounted into another app); the body limit is a pure ASGI middleware (it must see the
body before any route reads it), backed by a Content-Length check in the same dependency for routers
mounted without the middleware. Without a key, only requests whose `Host` is a loopback name are
answered: a web page whose own name rebinds to 127.0.0.1 (DNS rebinding) sends its own name as `Host`.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from starlette.requests import Request

from echo_tools.api.errors import ApiError, error_body
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


def make_guard(settings: ApiSettings) -> Callable[..., Awaitable[None]]:
    """The dependency every secured route runs: Content-Length within the limit, then the API key
    (without a key: the loopback `Host` check)."""
    expected = settings.api_key.encode() if settings.api_key else None
    required = settings.key_required
    limit = settings.max_body_bytes

    async def guard(request: Request) -> None:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            raise ApiError(
                413, "too_large", f"The request body of {length} bytes exceeds the {limit}-byte limit"
            )
        if not required and expected is None:
            refusal = host_refusal(request.headers.get("host"))
            if refusal is not None:
                raise refusal
            return
        key = presented_key(request.headers)
        if key is None:
            raise ApiError(
                401,
                "unauthorized",
                "An API key is required: send it as 'X-API-Key' or 'Authorization: Bearer'",
            )
        if expected is None or not hmac.compare_digest(key.encode(), expected):
            raise ApiError(401, "unauthorized", "The API key is wrong")

    return guard


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
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        declared = headers.get("content-length", "")
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
