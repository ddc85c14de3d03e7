"""The MCP SDK names `echo_tools.compat.mcp` relies on exist in the installed SDK, for its generation (the
suite runs on 1.x in `make test` and on 2.x in `make test-mcp2`), and the bridges there behave."""

from __future__ import annotations

import importlib
import inspect
import re
from importlib.metadata import version
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession

from echo_tools.compat import mcp as compat

ROOT = Path(__file__).resolve().parents[2]


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:2])


def _resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if isinstance(found, type) and not hasattr(found, name):
                # an attribute each instance sets: named in the class's __init__
                assert f"self.{name} " in inspect.getsource(found.__init__), dotted
                return found
            found = getattr(found, name)
        return found
    raise ImportError(dotted)


def test_the_installed_sdk_is_in_the_range_pyproject_names() -> None:
    pin = re.search(r'"mcp(>=[^"]+)"', (ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert pin is not None and pin.group(1) == compat.SUPPORTED == ">=1.20,<3"
    assert (1, 20) <= _release(version("mcp")) < (3, 0)
    assert compat.GENERATION == _release(version("mcp"))[0]


@pytest.mark.parametrize("name", compat.RELIED_ON[compat.GENERATION])
def test_every_name_relied_on_exists_in_the_installed_generation(name: str) -> None:
    _resolve(name)  # raises (failing the test, naming it) when the SDK renamed or removed it


def test_the_private_names_are_listed_and_only_1x_needs_one() -> None:
    assert compat.PRIVATE_NAMES == (
        ("mcp.shared.session.BaseSession._request_id", "mcp.client.auth.OAuthClientProvider._initialize")
        if compat.GENERATION == 1
        else ("mcp.client.auth.OAuthClientProvider._initialize",)
    )


def test_the_http_library_is_the_one_the_sdk_transports_take() -> None:
    import mcp.client.streamable_http as transport

    assert compat.HTTP_LIBRARY in transport.__dict__ or hasattr(transport, compat.HTTP_LIBRARY)
    assert compat.http_module().__name__ == compat.HTTP_LIBRARY


async def test_a_session_names_the_id_of_its_next_request_under_1x_and_none_under_2x() -> None:
    to_server, from_client = anyio.create_memory_object_stream[object](10)
    to_client, from_server = anyio.create_memory_object_stream[object](10)
    async with to_server, from_client, to_client, from_server:
        session = ClientSession(from_server, to_server)  # type: ignore[arg-type]
        first = compat.next_request_id(session)
        if compat.GENERATION >= 2:
            assert first is None  # 2.x cancels by itself: no id is needed
            return
        assert isinstance(first, int)
        async with session, anyio.create_task_group() as group:
            group.start_soon(session.send_ping)  # no server answers: only the id it took matters
            sent = await from_client.receive()
            assert compat.request_id_of(sent.message.model_dump_json()) == first  # type: ignore[attr-defined]
            assert compat.next_request_id(session) == first + 1
            group.cancel_scope.cancel()


def test_a_field_is_read_by_its_wire_name_under_either_generation() -> None:
    from mcp import types

    tool = types.Tool(
        name="t", inputSchema={"type": "object"}, annotations=types.ToolAnnotations(readOnlyHint=True)
    )
    assert compat.field(tool, "inputSchema") == {"type": "object"}
    assert compat.field(tool.annotations, "readOnlyHint") is True
    assert compat.field(types.ListToolsResult(tools=[], nextCursor="c2"), "nextCursor") == "c2"


def test_the_key_of_a_request_body_is_our_call_key_else_its_id() -> None:
    assert compat.request_key_of(b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call"}') == 7
    body = (
        b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"_meta": {"echo-tools/call": "k1"}}}'
    )
    assert compat.request_key_of(body) == "k1"
    assert compat.request_key_of(b'{"jsonrpc": "2.0", "method": "notifications/cancelled"}') is None
    assert compat.request_key_of(b"not json") is None
    assert compat.request_key_of(b"[1, 2]") is None


def test_requests_and_notifications_are_wrapped_only_under_1x() -> None:
    from mcp import types

    request = types.PingRequest()
    wrapped = compat.client_request(request)
    assert (wrapped is request) == (compat.GENERATION >= 2)
    assert compat.unwrap(wrapped) is request


def test_a_read_timeout_is_what_the_generation_takes() -> None:
    from datetime import timedelta

    assert compat.read_timeout(2.5) == (timedelta(seconds=2.5) if compat.GENERATION < 2 else 2.5)
