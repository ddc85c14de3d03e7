"""An httpx transport that notices what the MCP SDK does not: a POST's response stream that breaks mid-call
(the server died), and one that passes the server's `max_result_bytes`.

The SDK leaves a request pending forever when its response stream breaks without an event id; the
connection (`echo_tools.mcp.connection`) hears it from here and fails that call at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx

__all__ = ["WatchedTransport"]


class WatchedTransport(httpx.AsyncBaseTransport):
    """An httpx transport that calls `on_broken(request)` when a POST's response stream breaks,
    `on_too_large(request, error)` when it passes the server's `max_result_bytes`, and `on_refused(status)`
    when the server answers with an HTTP error status."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        on_broken: Callable[[httpx.Request], None],
        on_too_large: Callable[[httpx.Request, Exception], None],
        on_refused: Callable[[int], None] | None = None,
    ) -> None:
        self._inner = inner
        self._on_broken = on_broken
        self._on_too_large = on_too_large
        self._on_refused = on_refused

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if response.status_code >= 400 and self._on_refused is not None:
            self._on_refused(response.status_code)  # the 2.x SDK answers it as a JSON-RPC error without it
        if request.method == "POST":
            assert isinstance(response.stream, httpx.AsyncByteStream)
            response.stream = _WatchedStream(
                response.stream,
                lambda: self._on_broken(request),
                lambda error: self._on_too_large(request, error),
            )
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


class _WatchedStream(httpx.AsyncByteStream):
    def __init__(
        self,
        inner: httpx.AsyncByteStream,
        on_broken: Callable[[], None],
        on_too_large: Callable[[Exception], None],
    ) -> None:
        self._inner = inner
        self._on_broken = on_broken
        self._on_too_large = on_too_large

    async def __aiter__(self) -> AsyncIterator[bytes]:
        from echo_tools.egress_transport import ResponseTooLargeError

        try:
            async for chunk in self._inner:
                yield chunk
        except ResponseTooLargeError as exc:
            self._on_too_large(exc)
            raise
        except httpx.TransportError:
            self._on_broken()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()
