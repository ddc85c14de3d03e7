"""The MCP SDK's private names that echo_tools.compat.mcp relies on still exist in the installed SDK."""

from __future__ import annotations

from importlib.metadata import version

import anyio
from mcp import ClientSession

from echo_tools.compat import mcp as compat


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def test_the_installed_sdk_is_in_the_supported_range() -> None:
    assert compat.SUPPORTED == ">=1.20,<2"
    assert (1, 20) <= _release(version("mcp")) < (2, 0)


async def test_a_session_names_the_id_of_its_next_request_and_counts_up() -> None:
    to_server, from_client = anyio.create_memory_object_stream[object](10)
    to_client, from_server = anyio.create_memory_object_stream[object](10)
    async with to_server, from_client, to_client, from_server:
        session = ClientSession(from_server, to_server)  # type: ignore[arg-type]
        first = compat.next_request_id(session)
        assert isinstance(first, int)
        async with session, anyio.create_task_group() as group:
            group.start_soon(session.send_ping)  # no server answers: only the id it took matters
            sent = await from_client.receive()
            assert compat.request_id_of(sent.message.model_dump_json()) == first  # type: ignore[attr-defined]
            assert compat.next_request_id(session) == first + 1
            group.cancel_scope.cancel()


def test_the_id_of_a_request_body_is_read_and_anything_else_is_none() -> None:
    assert compat.request_id_of(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call"}') == 7
    assert compat.request_id_of(b'{"jsonrpc": "2.0", "method": "notifications/cancelled"}') is None
    assert compat.request_id_of(b"not json") is None
    assert compat.request_id_of(b"[1, 2]") is None
