"""The HTTP client the network tools share: one egress client per running event loop and policy.

Creating a client per call costs a TLS handshake and a connection pool each time; one per loop keeps
connections alive across calls while staying safe to use from any loop (an async client is bound to the
loop that created it). A loop's clients are closed when the loop ends (`asyncio.run` and every runner shut
its async generators down before closing it), so a short-lived loop leaves no open session. It is `echo_tools.egress.egress_client`: every connection goes to an address the
policy allowed, and bodies are decoded under a bound. The policy comes from the server's environment
(`egress_policy`).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import AsyncGenerator

import httpx

from echo_tools.egress import EgressPolicy, egress_client

USER_AGENT = "echo-tools/0.1 (+https://github.com/echo-tools)"
_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[EgressPolicy, httpx.AsyncClient]] = (
    weakref.WeakKeyDictionary()
)
# per loop, the async generator that closes its clients when the loop ends (see `_closer`)
_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncGenerator[None, None]] = (
    weakref.WeakKeyDictionary()
)


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def egress_policy() -> EgressPolicy:
    """The policy built from the environment (default: public addresses only).

    `ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK=1`, `ECHO_TOOLS_EGRESS_ALLOW_PRIVATE=1`,
    `ECHO_TOOLS_EGRESS_ALLOWED_HOSTS=host1,10.0.0.0/8`.
    """
    hosts = tuple(
        h.strip() for h in os.environ.get("ECHO_TOOLS_EGRESS_ALLOWED_HOSTS", "").split(",") if h.strip()
    )
    return EgressPolicy(
        allow_loopback=_flag("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK"),
        allow_private=_flag("ECHO_TOOLS_EGRESS_ALLOW_PRIVATE"),
        allowed_hosts=hosts,
    )


def shared_client(policy: EgressPolicy | None = None) -> httpx.AsyncClient:
    """The egress client of the running event loop for `policy` (default: `egress_policy()`), created on
    first use (redirects not followed)."""
    policy = policy or egress_policy()
    loop = asyncio.get_running_loop()
    clients = _clients.get(loop)
    if clients is None:
        clients = _clients[loop] = {}
        _closers[loop] = _started(_closer(clients))
    client = clients.get(policy)
    if client is None or client.is_closed:
        client = egress_client(
            policy,
            timeout=httpx.Timeout(10.0, connect=5.0),
            headers={"User-Agent": USER_AGENT},
            max_connections=20,
        )
        clients[policy] = client
    return client


async def close_shared_client() -> None:
    """Close the running loop's clients now (they are closed anyway when the loop ends)."""
    loop = asyncio.get_running_loop()
    _clients.pop(loop, None)
    closer = _closers.pop(loop, None)
    if closer is not None:
        await closer.aclose()


async def _closer(clients: dict[EgressPolicy, httpx.AsyncClient]) -> AsyncGenerator[None, None]:
    """Waits at its `yield` while the loop runs; closes `clients` when it is closed.

    An async generator started on a loop is closed by `loop.shutdown_asyncgens()`, which `asyncio.run`
    (and every runner) awaits before closing the loop: so a short-lived loop's clients are closed on that
    loop, instead of being collected open later (aiohttp's "Unclosed client session" on stderr).
    """
    try:
        yield
    finally:
        for client in list(clients.values()):
            await client.aclose()
        clients.clear()


def _started(generator: AsyncGenerator[None, None]) -> AsyncGenerator[None, None]:
    """`generator` run to its first `yield` (it does not await anything before it), which registers it
    with the running loop."""
    try:
        generator.asend(None).send(None)
    except StopIteration:  # how an async generator's `yield` ends the step that reached it
        pass
    return generator
