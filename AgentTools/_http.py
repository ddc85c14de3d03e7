"""The HTTP client the network tools share: one `httpx.AsyncClient` per running event loop.

Creating a client per call costs a TLS handshake and a connection pool each time; one per loop keeps
connections alive across calls while staying safe to use from any loop (an async client is bound to the
loop that created it). Bodies are read with `echo_tools.bounded_body.read_bounded`, never `.content`: httpx
decodes a whole chunk before it can be counted, so a compressed body could grow without bound.
"""

from __future__ import annotations

import asyncio
import weakref

import httpx

from echo_tools.bounded_body import ACCEPT_ENCODING

USER_AGENT = "echo-tools/0.1 (+https://github.com/echo-tools)"
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
    weakref.WeakKeyDictionary()
)


def shared_client() -> httpx.AsyncClient:
    """The `httpx.AsyncClient` of the running event loop, created on first use (redirects not followed)."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None or client.is_closed:
        client = httpx.AsyncClient(
            timeout=httpx.Timeout(10.0, connect=5.0),
            headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
            limits=httpx.Limits(max_connections=20, max_keepalive_connections=10),
            follow_redirects=False,
        )
        _clients[loop] = client
    return client


async def close_shared_client() -> None:
    """Close the running loop's client (tests and shutdown)."""
    client = _clients.pop(asyncio.get_running_loop(), None)
    if client is not None:
        await client.aclose()
