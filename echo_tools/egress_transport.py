"""The transport under every outbound request (`echo_tools.egress.egress_client`): pinned and bounded.

Each request's URL is checked (scheme, literal addresses, loopback names); a host name is resolved once,
by `PinnedResolver`, which checks every address it resolved to and hands aiohttp only those, so the
connection goes to an address that was checked (the URL, the TLS server name and the `Host` header are
unchanged). Bodies are decoded here, through `bounded_body.BoundedDecoder`, whatever their
`Content-Encoding`, and a body past the bound ends with `ResponseTooLargeError`: no caller (httpx's own
`aread`, the MCP SDK, the OAuth flow) ever sees more than the bound.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import AsyncIterator
from typing import Any, Protocol

import aiohttp
import httpx
from aiohttp.abc import AbstractResolver, ResolveResult
from httpx_aiohttp import AiohttpTransport

from echo_tools.bounded_body import BoundedDecoder, UndecodableBodyError


class AddressPolicy(Protocol):
    """What the transport asks of an egress policy (`echo_tools.egress.EgressPolicy` is the one in use)."""

    @property
    def max_response_bytes(self) -> int: ...

    def check_url(self, url: str) -> None: ...

    def check_address(
        self, address: ipaddress.IPv4Address | ipaddress.IPv6Address, url: str = ""
    ) -> None: ...

    def allows_host_name(self, host: str) -> bool: ...


DECODED_FROM = "echo_tools.decoded_from"  # response extension: the Content-Encoding undone here


class ResponseTooLargeError(httpx.DecodingError):
    """A response body, decoded, passed the bound of the client that read it; reading stopped there."""


class RefusedEncodingError(httpx.DecodingError):
    """A response's `Content-Encoding` cannot be decoded under a bound, or its bytes do not decode."""


class PinnedResolver(AbstractResolver):
    """Resolves a host once and returns only addresses the policy allows (aiohttp connects to those).

    Args:
        policy: the egress policy every address must pass.
        inner: the resolver asked (default: aiohttp's `ThreadedResolver`, the system's getaddrinfo); tests
            inject one that answers what they choose.
    """

    def __init__(self, policy: AddressPolicy, inner: AbstractResolver | None = None) -> None:
        self.policy = policy
        self.inner = inner or aiohttp.ThreadedResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self.inner.resolve(host, port, family)
        where = f"host {host!r}"
        if not self.policy.allows_host_name(host):
            for answer in answers:
                self.policy.check_address(ipaddress.ip_address(answer["host"]), where)
        return answers

    async def close(self) -> None:
        await self.inner.close()


class _BoundedStream(httpx.AsyncByteStream):
    """The raw body decoded under `limit`; past it, `ResponseTooLargeError` after the bytes up to it."""

    def __init__(self, inner: httpx.AsyncByteStream, decoder: BoundedDecoder, request: httpx.Request) -> None:
        self.inner, self.decoder, self.request = inner, decoder, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        raw = 0
        limit = self.decoder.limit
        try:
            async for chunk in self.inner:
                raw += len(chunk)
                data = self.decoder.feed(chunk)
                if data:
                    yield data
                if self.decoder.exceeded or raw > limit:
                    raise ResponseTooLargeError(
                        f"the response of {self.request.url.copy_with(query=None)} exceeds the limit of "
                        f"{limit} bytes{_decoded_note(self.decoder)}; reading stopped",
                        request=self.request,
                    )
        except UndecodableBodyError as exc:
            raise RefusedEncodingError(str(exc), request=self.request) from exc

    async def aclose(self) -> None:
        await self.inner.aclose()


class _EventBoundedStream(httpx.AsyncByteStream):
    """An uncompressed event stream (SSE) lives as long as its session: each event is bounded, not the whole."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int, request: httpx.Request) -> None:
        self.inner, self.limit, self.request = inner, limit, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = 0  # bytes since the last blank line (the end of an event)
        async for chunk in self.inner:
            normal = chunk.replace(b"\r\n", b"\n")
            end = normal.rfind(b"\n\n")
            pending = len(normal) - end - 2 if end >= 0 else pending + len(normal)
            if pending > self.limit:
                raise ResponseTooLargeError(
                    f"an event of the stream {self.request.url.copy_with(query=None)} exceeds the limit of "
                    f"{self.limit} bytes; reading stopped",
                    request=self.request,
                )
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def _decoded_note(decoder: BoundedDecoder) -> str:
    return f" (decoded from Content-Encoding {decoder.encoding!r})" if decoder.encoding else ""


class EgressTransport(httpx.AsyncBaseTransport):
    """httpx over aiohttp, every connection pinned to checked addresses, every body decoded under a bound.

    Args:
        policy: the egress policy.
        max_body_bytes: the decoded size at which a body is cut (default: `policy.max_response_bytes`).
        resolver: the aiohttp resolver asked for addresses (a test's, or the system's).
        max_connections: the connection pool's size.
    """

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        max_body_bytes: int | None = None,
        resolver: AbstractResolver | None = None,
        max_connections: int = 100,
    ) -> None:
        self.policy = policy
        self.limit = max_body_bytes or policy.max_response_bytes
        self._resolver = resolver
        self._max_connections = max_connections
        self._inner = AiohttpTransport(client=self._session)
        self._passed: set[tuple[str, str]] = set()  # (scheme, host) the frozen policy let through

    def _session(self) -> aiohttp.ClientSession:
        # called by the aiohttp transport at its first request, inside the running loop
        connector = aiohttp.TCPConnector(
            resolver=PinnedResolver(self.policy, self._resolver),
            ssl=httpx.create_ssl_context(),
            limit=self._max_connections,
        )
        return aiohttp.ClientSession(connector=connector, trust_env=False, auto_decompress=False)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if (url.scheme, url.host) not in self._passed:
            self.policy.check_url(str(url))  # scheme, literal addresses, loopback names: before DNS
            if len(self._passed) < 1024:
                self._passed.add((url.scheme, url.host))
        try:
            response = await self._inner.handle_async_request(request)
        except httpx.ConnectTimeout as exc:
            # httpx-aiohttp maps a refused connection to a timeout; it is a connection error
            if isinstance(exc.__cause__, aiohttp.ClientConnectorError):
                raise httpx.ConnectError(str(exc), request=request) from exc.__cause__
            raise
        encoding = response.headers.get("content-encoding")
        try:
            decoder = BoundedDecoder(encoding, self.limit)
        except UndecodableBodyError as exc:
            await response.aclose()
            raise RefusedEncodingError(str(exc), request=request) from exc
        headers = response.headers
        extensions: dict[str, Any] = dict(response.extensions)
        if decoder.layers:  # the body handed on is decoded: httpx must not decode it again
            headers = headers.copy()
            del headers["content-encoding"]
            headers.pop("content-length", None)
            extensions[DECODED_FROM] = encoding
        assert isinstance(response.stream, httpx.AsyncByteStream)
        stream: httpx.AsyncByteStream = _BoundedStream(response.stream, decoder, request)
        if not decoder.layers and headers.get("content-type", "").startswith("text/event-stream"):
            stream = _EventBoundedStream(response.stream, self.limit, request)
        return httpx.Response(
            response.status_code,
            headers=headers,
            stream=stream,
            extensions=extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


class Httpx2Bridge:
    """The same pinned, bounded transport for an `httpx2.AsyncClient` (the MCP SDK 2.x's HTTP client).

    `httpx2` is a fork of httpx with its own types: this bridge takes each `httpx2.Request`, sends it as an
    `httpx.Request` through `inner` (an `EgressTransport`, maybe wrapped), and hands the answer back as an
    `httpx2.Response` whose body streams from the same bounded stream. Errors keep their kind
    (`httpx.ConnectError` becomes `httpx2.ConnectError`; `ResponseTooLargeError` an `httpx2.DecodingError`
    with its message), so the SDK's error handling sees what it knows. Redirects and auth flows are the
    httpx2 client's, each hop a request through here, so every hop passes the policy.

    Built by `echo_tools.egress.egress_client(..., library="httpx2")` only; an `httpx2.AsyncBaseTransport`
    at run time (the class is made when httpx2 is first needed: it is the SDK 2.x's dependency, not ours).
    """

    def __new__(cls, inner: httpx.AsyncBaseTransport) -> Any:
        return _bridge_class()(inner)


_BRIDGE: list[type] = []


def _bridge_class() -> type:
    if _BRIDGE:
        return _BRIDGE[0]
    import httpx2

    def mapped(exc: httpx.HTTPError, request: Any) -> Exception:
        kind = getattr(httpx2, type(exc).__name__, None)
        if not (isinstance(kind, type) and issubclass(kind, httpx2.HTTPError)):
            for base in type(exc).__mro__:  # ResponseTooLargeError -> DecodingError, and so on
                kind = getattr(httpx2, base.__name__, None)
                if isinstance(kind, type) and issubclass(kind, httpx2.HTTPError):
                    break
            else:
                kind = httpx2.TransportError
        maker: Any = kind
        try:
            return maker(str(exc), request=request)  # type: ignore[no-any-return]
        except TypeError:
            return maker(str(exc))  # type: ignore[no-any-return]

    class _Stream(httpx2.AsyncByteStream):
        def __init__(self, inner: httpx.AsyncByteStream, request: Any) -> None:
            self.inner, self.request = inner, request

        async def __aiter__(self) -> AsyncIterator[bytes]:
            try:
                async for chunk in self.inner:
                    yield chunk
            except httpx.HTTPError as exc:
                raise mapped(exc, self.request) from exc

        async def aclose(self) -> None:
            await self.inner.aclose()

    class _Bridge(httpx2.AsyncBaseTransport):
        def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
            self.inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            body = await request.aread()
            sent = httpx.Request(
                request.method,
                str(request.url),
                headers=list(request.headers.raw),
                content=body,
                extensions=dict(request.extensions),
            )
            try:
                response = await self.inner.handle_async_request(sent)
            except httpx.HTTPError as exc:
                raise mapped(exc, request) from exc
            assert isinstance(response.stream, httpx.AsyncByteStream)
            return httpx2.Response(
                response.status_code,
                headers=list(response.headers.raw),
                stream=_Stream(response.stream, request),
                extensions=dict(response.extensions),
                request=request,
            )

        async def aclose(self) -> None:
            await self.inner.aclose()

    _BRIDGE.append(_Bridge)
    return _Bridge
