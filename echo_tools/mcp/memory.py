"""MCP servers in this process: the SDK's in-memory transport in place of a server process.

A test (or a host embedding a server) that needs a protocol peer and not a process serves an SDK server
object under a server name; while the `with` block lasts, every session the pool opens for that name talks
to the object in this process (the SDK's memory streams, or under 2.x its `Client(server)`, which over the
2026-07-28 revision calls the server directly) instead of starting the configured
command or reaching the configured URL. The configuration is stored and checked as ever; only the
transport differs. What a process proves (a start that fails, stderr, a crash, a kill on close, HTTP
limits) stays with the real transports::

    with serve_in_memory("calc", calc_server.mcp):      # an SDK server object (FastMCP, MCPServer, Server)
        registry.add_mcp_server("calc", {"command": "calc-server"})
        executor.invoke_sync("mcp_calc_add", {"a": 2, "b": 3})
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import ClientSession

__all__ = ["in_memory_session", "serve_in_memory"]

_SERVED: dict[str, Any] = {}
_LOCK = threading.Lock()


@contextmanager
def serve_in_memory(name: str, server: Any) -> Iterator[None]:
    """Serve `server` (an SDK `FastMCP` or low-level `Server`) to every session opened for `name` (as
    the registry spells it: lower case) until the block ends. Sessions already open keep their transport.

    Raises:
        ValueError: another server is already served under `name`.
    """
    key = name.lower()
    with _LOCK:
        if key in _SERVED:
            raise ValueError(f"an MCP server is already served in memory as {key!r}")
        _SERVED[key] = server
    try:
        yield
    finally:
        with _LOCK:
            _SERVED.pop(key, None)


def in_memory_session(name: str) -> Callable[..., AbstractAsyncContextManager[ClientSession]] | None:
    """For the session pool: a factory of negotiated sessions on the server served as `name`, taking the
    config's `protocol` and `ClientSession`'s callback keywords; None when nothing is served under that
    name."""
    with _LOCK:
        server = _SERVED.get(name.lower())
    if server is None:
        return None

    @asynccontextmanager
    async def session(mode: str, **kwargs: Any) -> AsyncIterator[ClientSession]:
        from echo_tools.compat.mcp import in_memory_client

        async with in_memory_client(server, mode, **kwargs) as connected:
            yield connected

    return session
