"""Everything that differs between the two generations of the MCP SDK (`mcp` 1.x and 2.x), in one place.

echo-tools installs with either (`mcp>=1.20,<3`, the pyproject range `SUPPORTED`): 1.x is what
langchain-mcp-adapters accepts, 2.x speaks the 2026-07-28 revision of the protocol (no `initialize`,
`server/discover`, `InputRequiredResult`, per-request log levels, cache hints). The rest of echo-tools
names no SDK type whose shape differs between them; it asks this module. The names each generation is
relied on for are listed in `RELIED_ON`, and tests/echo_tools/test_compat_mcp.py fails when the installed
SDK lacks one of its generation's.

What differs, and how it is bridged here:

- **Requests and notifications**: 1.x wraps each in `ClientRequest(...)` / `ClientNotification(...)`
  (RootModels, read with `.root`); 2.x takes and hands out the bare models (`client_request`,
  `client_notification`, `unwrap`).
- **Field names**: 1.x models carry the wire's camelCase names as attributes, 2.x snake_case (both
  accept either as constructor keywords): `field(model, "nextCursor")` reads either.
- **Errors**: `McpError` (1.x) / `MCPError` (2.x), `MCPError` here; a read timeout is code 408 (1.x) or
  -32001 (2.x); an HTTP session the server forgot is 32600 (1.x) or -32600 "Session terminated" (2.x).
- **Timeouts**: `timedelta` (1.x) or float seconds (2.x): `read_timeout`.
- **Negotiation**: 1.x knows only `initialize`; 2.x discovers (`server/discover`) and falls back to
  `initialize` (`negotiate`, the SDK's own policy written with its public session methods).
- **Request ids**: 1.x assigns a request's JSON-RPC id inside `send_request` and never sends
  `notifications/cancelled`; the id is read from its private counter (`BaseSession._request_id`, the only
  private name relied on) so echo-tools can name a cancelled request. 2.x cancels by itself (a
  notification on stdio, closing the request's stream over HTTP), so no id is needed there.
- **HTTP clients**: 1.x's transports take an `httpx.AsyncClient`, 2.x's an `httpx2.AsyncClient`
  (`HTTP_LIBRARY`); echo-tools builds both in `echo_tools.egress` only. Streamable HTTP yields three
  values under 1.x, two under 2.x (`streamable_http`).
- **In-process servers**: 1.x's `create_connected_server_and_client_session`, 2.x's `Client(server)`
  (`in_memory_client`).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import timedelta
from importlib.metadata import version as _dist_version
from typing import Any

SUPPORTED = ">=1.20,<3"  # the pyproject range; tests/echo_tools/test_compat_mcp.py checks the names below
GENERATION = int(_dist_version("mcp").split(".")[0])
HTTP_LIBRARY = "httpx" if GENERATION < 2 else "httpx2"  # the HTTP client package the SDK's transports take

# what each generation is relied on for, checked by tests/echo_tools/test_compat_mcp.py
RELIED_ON: dict[int, tuple[str, ...]] = {
    1: (
        "mcp.ClientSession.send_request",
        "mcp.ClientSession.initialize",
        "mcp.ClientSession.get_server_capabilities",
        "mcp.shared.session.BaseSession._request_id",  # private: see the module docstring
        "mcp.shared.exceptions.McpError",
        "mcp.shared.memory.create_connected_server_and_client_session",
        "mcp.client.streamable_http.streamable_http_client",
        "mcp.client.sse.sse_client",
        "mcp.client.stdio.stdio_client",
        "mcp.types.ClientRequest",
        "mcp.types.ClientNotification",
        "mcp.types.CancelledNotification",
        "mcp.client.auth.OAuthClientProvider._initialize",  # the SDK's documented extension point
    ),
    2: (
        "mcp.ClientSession.send_request",
        "mcp.ClientSession.initialize",
        "mcp.ClientSession.send_discover",
        "mcp.ClientSession.adopt",
        "mcp.ClientSession.protocol_version",
        "mcp.ClientSession.server_capabilities",
        "mcp.MCPError",
        "mcp.Client",
        "mcp.client.streamable_http.streamable_http_client",
        "mcp.client.sse.sse_client",
        "mcp.client.stdio.stdio_client",
        "mcp.types.InputRequiredResult",
        "mcp.types.DiscoverResult",
        "mcp.types.UnsupportedProtocolVersionErrorData",
        "mcp.types.LOG_LEVEL_META_KEY",
        "mcp.types.version.MODERN_PROTOCOL_VERSIONS",
        "mcp.types.version.HANDSHAKE_PROTOCOL_VERSIONS",
        "mcp.client.auth.AuthorizationCodeResult",
        "mcp.client.auth.OAuthClientProvider._initialize",
    ),
}
PRIVATE_NAMES = tuple(name for name in RELIED_ON[GENERATION] if "._" in name)

# the protocol revisions echo-tools knows by name, whatever SDK is installed (a config may name them)
MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"  # 2026-07-28: a request opts in to log messages
CALL_META = "echo-tools/call"  # our key in a request's _meta: ties an HTTP exchange to the call it carries


def __getattr__(name: str) -> Any:
    """`MCPError`: the SDK's protocol error (`McpError` under 1.x), imported when first named, so that
    importing echo-tools does not import the SDK (`echo-tools list` stays light)."""
    if name == "MCPError":
        if GENERATION < 2:
            from mcp.shared.exceptions import McpError as found
        else:
            from mcp import MCPError as found  # type: ignore[attr-defined, no-redef, unused-ignore]
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CALL_META",
    "GENERATION",
    "HANDSHAKE_VERSIONS",
    "HTTP_LIBRARY",
    "LOG_LEVEL_META",
    "MODERN_VERSIONS",
    "PRIVATE_NAMES",
    "RELIED_ON",
    "SUPPORTED",
    "client_notification",
    "client_request",
    "error_code",
    "error_text",
    "field",
    "http_module",
    "in_memory_client",
    "input_required",
    "is_read_timeout",
    "is_session_gone",
    "negotiate",
    "next_request_id",
    "protocol_version",
    "read_timeout",
    "request_key_of",
    "sdk_speaks",
    "server_capabilities",
    "streamable_http",
]

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def field(model: Any, camel: str, default: Any = None) -> Any:
    """A field of an SDK model by its wire name (`nextCursor`): camelCase under 1.x, snake_case under 2.x."""
    if GENERATION < 2:
        return getattr(model, camel, default)
    name = _SNAKE.get(camel)
    if name is None:
        name = _SNAKE[camel] = _CAMEL.sub("_", camel).lower()
    return getattr(model, name, default)


_SNAKE: dict[str, str] = {}


def client_request(request: Any) -> Any:
    """What `ClientSession.send_request` takes for `request` (a `CallToolRequest`, ...)."""
    if GENERATION < 2:
        from mcp import types

        return types.ClientRequest(request)
    return request


def client_notification(notification: Any) -> Any:
    """What `ClientSession.send_notification` takes for `notification`."""
    if GENERATION < 2:
        from mcp import types

        return types.ClientNotification(notification)
    return notification


def unwrap(message: Any) -> Any:
    """The notification or request inside what a session's `message_handler` receives."""
    return getattr(message, "root", message) if GENERATION < 2 else message


def read_timeout(seconds: float) -> Any:
    """A request's read timeout as the SDK takes it."""
    return timedelta(seconds=seconds) if GENERATION < 2 else float(seconds)


def error_code(error: Any) -> int:
    return int(error.error.code)


def error_text(error: Any) -> str:
    return str(error.error.message)


def is_read_timeout(error: Any) -> bool:
    """The SDK's own read timeout ran out (408 under 1.x, -32001 under 2.x)."""
    return error_code(error) == (408 if GENERATION < 2 else -32001)


def is_session_gone(error: Any) -> bool:
    """An HTTP server answered 404 for a session it no longer knows."""
    if GENERATION < 2:
        return error_code(error) == 32600
    # the SDK's own "Session terminated", or the server's JSON-RPC body ("Session not found")
    return error_code(error) == -32600 and "session" in error_text(error).lower()


def server_capabilities(session: Any) -> Any:
    if GENERATION < 2:
        return session.get_server_capabilities()
    return session.server_capabilities


def protocol_version(session: Any) -> str | None:
    """The revision a session negotiated (None before it did)."""
    if GENERATION < 2:
        result = getattr(session, "_echo_initialize_result", None)
        return None if result is None else str(result.protocolVersion)
    version: str | None = session.protocol_version
    return version


def sdk_speaks(version: str) -> bool:
    """Whether the installed SDK speaks protocol revision `version`."""
    if GENERATION < 2:
        from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS

        return version in SUPPORTED_PROTOCOL_VERSIONS
    from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    return version in HANDSHAKE_PROTOCOL_VERSIONS or version in MODERN_PROTOCOL_VERSIONS


class ProtocolMismatch(Exception):
    """The server and this client share no protocol revision, or the server claimed one it then broke."""


async def negotiate(session: Any, mode: str) -> str:
    """Open `session` at the newest revision both sides speak; returns it.

    `mode` is the server config's `protocol`: `"auto"` (2.x: `server/discover` at the newest modern
    revision, then the `initialize` handshake when the server does not answer it as a modern server
    would: the 2.x SDK's own policy), `"legacy"` (the handshake only) or a modern revision (pinned: no
    negotiation traffic). Under 1.x everything is the handshake, and a modern pin is refused.

    Raises:
        ProtocolMismatch: no revision in common, or a pin the installed SDK does not speak.
    """
    if GENERATION < 2:
        if mode not in ("auto", "legacy"):
            raise ProtocolMismatch(
                f"protocol {mode!r} needs the MCP SDK 2.x; the installed mcp {_dist_version('mcp')} speaks "
                "only the 2025 revisions (set protocol to 'auto' or 'legacy', or install mcp>=2)"
            )
        return await _initialize(session)
    if mode == "legacy":
        return await _initialize(session)
    from mcp import types

    if mode != "auto":
        if not sdk_speaks(mode) or mode not in MODERN_VERSIONS:
            raise ProtocolMismatch(f"protocol {mode!r} is not a modern revision this SDK speaks")
        session.adopt(
            types.DiscoverResult(supported_versions=[mode], capabilities=types.ServerCapabilities())  # type: ignore[attr-defined, unused-ignore]
        )
        return mode
    return await _auto(session)


async def _initialize(session: Any) -> str:
    try:
        result = await session.initialize()
    except RuntimeError as exc:  # the SDK refuses a revision it does not speak
        if "protocol version" in str(exc).lower():
            raise ProtocolMismatch(str(exc)) from None
        raise
    version = str(field(result, "protocolVersion"))
    if GENERATION < 2:
        session._echo_initialize_result = result  # our own attribute: 1.x keeps no record of it
        if not sdk_speaks(version):
            raise ProtocolMismatch(f"the server answered initialize with protocol version {version!r}")
    return version


async def _auto(session: Any) -> str:
    """The 2.x SDK's `mode="auto"` policy (discover, then fall back), with the session's public methods."""
    from mcp import MCPError, types  # type: ignore[attr-defined, unused-ignore]
    from mcp.types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
    from pydantic import ValidationError

    unsupported = -32022  # UNSUPPORTED_PROTOCOL_VERSION
    version = MODERN_PROTOCOL_VERSIONS[-1]
    for attempt in range(2):
        try:
            raw = await session.send_discover(version)
        except MCPError as exc:
            if error_code(exc) == unsupported:
                supported = _supported(exc)
                mutual = [v for v in MODERN_PROTOCOL_VERSIONS if v in (supported or ())]
                if mutual and attempt == 0:
                    version = mutual[-1]
                    continue
                if supported is not None and not any(v in HANDSHAKE_PROTOCOL_VERSIONS for v in supported):
                    raise ProtocolMismatch(
                        f"the server speaks only {supported}, none of which this client speaks"
                    ) from None
            return await _initialize(session)  # any other refusal: a server of the handshake era
        try:
            result = types.DiscoverResult.model_validate(raw)  # type: ignore[attr-defined, unused-ignore]
        except ValidationError:
            return await _initialize(session)
        if not any(v in result.supported_versions for v in MODERN_PROTOCOL_VERSIONS):
            return await _initialize(session)
        session.adopt(result)
        return str(session.protocol_version)
    raise AssertionError("unreachable")  # pragma: no cover


def _supported(error: Any) -> list[str] | None:
    data = getattr(error.error, "data", None)
    supported = data.get("supported") if isinstance(data, Mapping) else None
    return [str(v) for v in supported] if isinstance(supported, list) else None


def input_required(result: Any) -> bool:
    """Whether `result` is a 2026-07-28 `InputRequiredResult` (the server needs answers, then a retry)."""
    if GENERATION < 2:
        return False
    from mcp import types

    return isinstance(result, types.InputRequiredResult)  # type: ignore[attr-defined, unused-ignore]


def result_type(result_model: Any) -> Any:
    """What `send_request` validates a request's answer as: under 2.x a request that may be answered with
    `InputRequiredResult` (tools/call, resources/read, prompts/get) gets the union of both."""
    if GENERATION < 2:
        return result_model
    from mcp import types
    from pydantic import TypeAdapter

    if result_model in (types.CallToolResult, types.ReadResourceResult, types.GetPromptResult):
        adapter = _ADAPTERS.get(result_model)
        if adapter is None:  # built once: a TypeAdapter costs about a millisecond
            adapter = _ADAPTERS[result_model] = TypeAdapter(result_model | types.InputRequiredResult)  # type: ignore[operator, attr-defined, unused-ignore]
        return adapter
    return result_model


_ADAPTERS: dict[Any, Any] = {}


def next_request_id(session: Any) -> int | None:
    """The JSON-RPC id 1.x's `session.send_request` gives the next request (it takes it before its first
    await, so read right before the call it names that call); None under 2.x, which cancels by itself."""
    if GENERATION >= 2:
        return None
    request_id: int = session._request_id
    return request_id


def request_key_of(body: bytes | str) -> Any:
    """What ties an HTTP request we sent to its call: the `_meta` key `CALL_META` when present (2.x),
    else the JSON-RPC id (1.x); None when the body has neither."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict) and CALL_META in meta:
        return meta[CALL_META]
    return message.get("id")


def request_id_of(body: bytes | str) -> Any:
    """The JSON-RPC id in the body of a request we sent, or None when it has none."""
    try:
        message = json.loads(body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


def http_module() -> Any:
    """The HTTP client package the installed SDK's transports take (`httpx` or `httpx2`)."""
    import importlib

    return importlib.import_module(HTTP_LIBRARY)


@asynccontextmanager
async def streamable_http(url: str, http_client: Any) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's streamable HTTP transport on `http_client`: (read, write). Under 2.x its own bound on one
    event (1 MiB) is lifted: the egress client bounds each event at the server's `max_result_bytes`, and
    names that bound when it stops one."""
    from mcp.client.streamable_http import streamable_http_client

    options: dict[str, Any] = {} if GENERATION < 2 else {"max_sse_event_size": None}
    async with streamable_http_client(url, http_client=http_client, **options) as streams:
        yield streams[0], streams[1]


@asynccontextmanager
async def in_memory_client(server: Any, mode: str, **kwargs: Any) -> AsyncIterator[Any]:
    """A negotiated `ClientSession` on `server` (an SDK server object) in this process; `kwargs` are
    `ClientSession`'s callback keywords."""
    if GENERATION < 2:
        from mcp.shared.memory import create_connected_server_and_client_session

        async with create_connected_server_and_client_session(server, **kwargs) as session:
            session._echo_initialize_result = None  # type: ignore[attr-defined, unused-ignore]
            yield session
        return
    from mcp import Client  # type: ignore[attr-defined, unused-ignore]

    pinned = mode if mode in ("auto", "legacy") else "auto"
    async with Client(server, mode=pinned, **kwargs) as client:
        yield client.session


def oauth_callback(callback: Any) -> Any:
    """A host's OAuth callback (`async () -> (code, state)`) as the SDK's provider calls it."""
    if GENERATION < 2:
        return callback
    from mcp.client.auth import AuthorizationCodeResult  # type: ignore[attr-defined, unused-ignore]

    async def answer() -> Any:
        code, state = await callback()
        return AuthorizationCodeResult(code=code, state=state)

    return answer
