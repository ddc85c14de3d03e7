"""One MCP server's client session (`Connection`), held open by a runner task on the background loop.

The runner task enters the transport and the SDK's `ClientSession` and stays inside them until the
connection is closed (anyio cancel scopes must be left by the task that entered them); every call on it
runs on that loop (`on_background_loop`), so a session never crosses loops. A request carries its own id,
listener and callbacks (`echo_tools.mcp.callbacks`); a session found dead before a request left raises
`NotSent`, a connection lost while it was in flight `Lost`, and the pool (`echo_tools.mcp.sessions`)
decides whether to try again.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import tempfile
from collections.abc import Callable, Coroutine, Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ValidationError

from echo_tools.compat import mcp as compat
from echo_tools.egress import egress_client
from echo_tools.env_refs import resolve_env_refs
from echo_tools.errors import MCPConnectionError, ToolConfigError, ToolExecutionError, ToolTimeoutError
from echo_tools.mcp.callbacks import SessionCallbacks
from echo_tools.mcp.limits import max_result_bytes
from echo_tools.mcp.memory import in_memory_session
from echo_tools.mcp.rounds import as_json, exchange, first_problem, listen_for_tool_changes, relist, with_meta
from echo_tools.mcp.stream_watch import WatchedTransport
from echo_tools.mcp.tasks import TASKS, TaskHandle, follow_task, offers_tasks
from echo_tools.runtime import background_loop

if TYPE_CHECKING:
    import httpx
    from mcp import ClientSession, types

    from echo_tools.egress import EgressPolicy
    from echo_tools.mcp.callbacks import CallHooks

__all__ = [
    "CLOSE_TIMEOUT_S",
    "Connection",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_MAX_CONCURRENCY",
    "Listener",
    "Lost",
    "NotSent",
    "SessionBroken",
    "on_background_loop",
]

logger = logging.getLogger("echo_tools.mcp")

T = TypeVar("T")
R = TypeVar("R", bound=BaseModel)
DEFAULT_CONNECT_TIMEOUT_S = 15.0
DEFAULT_MAX_CONCURRENCY = 32
CLOSE_TIMEOUT_S = 6.0
_HEADER_MISMATCH = -32020  # 2026-07-28: an Mcp-Param-* header missing or not matching the body
_STDERR_LIMIT = 1024 * 1024

# what a call hears while it runs: ("progress", {progress, total, message}) or ("log", {level, logger, data})
Listener = Callable[[str, dict[str, Any]], None]


async def on_background_loop(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run `factory()` on the background loop; cancelling the caller cancels it there too."""
    loop = background_loop()
    if asyncio.get_running_loop() is loop:
        return await factory()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(factory(), loop))


class SessionBroken(Exception):
    """The session broke; internal, turned into `MCPConnectionError` or a retry by the pool."""


class NotSent(SessionBroken):
    """The session was dead before the request left: safe to retry on a fresh session."""


class Lost(SessionBroken):
    """The connection broke while the request was in flight: the server may have run it."""


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


class Connection:
    """One server's session, held open by a runner task until `close()` or until the transport breaks."""

    def __init__(
        self,
        name: str,
        config: Mapping[str, Any],
        egress: EgressPolicy,
        on_tools_changed: Callable[[str], None] | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.egress = egress
        self.session: ClientSession | None = None
        self.alive = True
        self.error: str | None = None
        self._on_tools_changed = on_tools_changed
        self._loop = asyncio.get_running_loop()
        self._ready: asyncio.Future[ClientSession] = self._loop.create_future()
        self._stop = asyncio.Event()
        self._limit = asyncio.Semaphore(int(config.get("max_concurrency") or DEFAULT_MAX_CONCURRENCY))
        self._calls: set[asyncio.Task[Any]] = set()
        self._lost: set[asyncio.Task[Any]] = set()
        self._refused: dict[asyncio.Task[Any], str] = {}  # calls whose answer passed max_result_bytes
        self._by_id: dict[int | None, asyncio.Task[Any]] = {}
        self._listeners: dict[int, Listener] = {}
        self._hooks: dict[int, CallHooks] = {}  # sampling, elicitation: what each call in flight binds
        # checks the config's `roots` and `sampling_max_tokens` first: a bad value is a ToolConfigError
        self._callbacks = SessionCallbacks(name, config, lambda: list(self._hooks.values()))
        self._background: set[asyncio.Task[Any]] = set()
        self._errlog: Any = None
        self._count = 0
        self.protocol: str | None = None  # the revision negotiated (None until then)
        self._status: int | None = None  # the last HTTP error status the server answered
        self._runner = self._loop.create_task(self._run(), name=f"mcp-session-{name}")

    # -- lifetime (runner task) ----------------------------------------------------------------------

    async def _run(self) -> None:
        from mcp import ClientSession, types

        try:
            async with AsyncExitStack() as stack:
                kwargs = {
                    "message_handler": self._on_message,
                    **self._callbacks.session_kwargs(),
                    "client_info": types.Implementation(name="echo-tools", version=_package_version()),
                }
                mode = str(self.config.get("protocol") or "auto")
                in_memory = in_memory_session(self.name)  # a server object served in this process
                if in_memory is not None:
                    session = await stack.enter_async_context(in_memory(mode, **kwargs))
                    self.protocol = compat.protocol_version(session)
                else:
                    read, write = await self._open_transport(stack)
                    if compat.GENERATION >= 2:  # 2026-07-28: long tools may answer with a task
                        kwargs["extensions"] = {TASKS: {}}
                    session = await stack.enter_async_context(ClientSession(read, write, **kwargs))
                    try:
                        self.protocol = await compat.negotiate(session, mode)
                    except compat.ProtocolMismatch as exc:
                        raise MCPConnectionError(
                            f"MCP server {self.name!r} ({self.target}): {exc}; nothing was listed or stored "
                            f"(mcpServers.{self.name}.protocol sets the revision to speak)"
                        ) from None
                self.session = session
                self._ready.set_result(session)
                if self._on_tools_changed is not None and self.protocol in compat.MODERN_VERSIONS:
                    # 2026-07-28: changes come on a listen stream
                    self._spawn(listen_for_tool_changes(self.name, session, self._on_tools_changed))
                await self._stop.wait()
        except (Exception, BaseExceptionGroup) as exc:  # boundary: any transport failure ends the connection
            self.error = self._describe(exc)
            logger.debug("MCP server %r: session ended: %s", self.name, self.error)
        finally:
            self.alive = False
            if not self._ready.done():
                self._ready.set_exception(MCPConnectionError(self.error or self._closed_message()))
                self._ready.exception()  # retrieved: a waiter that timed out must not leave a log line
            for task in list(self._calls):
                self._lost.add(task)
                task.cancel()
            if self._errlog is not None:
                self._errlog.close()

    async def _open_transport(self, stack: AsyncExitStack) -> tuple[Any, Any]:
        config = self.config
        if config.get("transport", "stdio") == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            env = config.get("env")
            params = StdioServerParameters(
                command=config["command"],
                args=list(config.get("args") or []),
                env=resolve_env_refs(env, server=self.name, field="env") if env else None,
                cwd=config.get("cwd"),
            )
            # stderr goes to an unlinked temp file: its tail explains a server that dies at start
            self._errlog = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # closed when the runner ends
            read, write = await stack.enter_async_context(stdio_client(params, errlog=self._errlog))
            return read, write
        url = config["url"]
        self.egress.check_url(url)  # a clear refusal before connecting; the client checks each address
        headers = resolve_env_refs(config.get("headers") or {}, server=self.name, field="headers")
        from echo_tools.mcp.auth import connection_auth  # a stored credential, OAuth 2.1 or the host's

        auth = await connection_auth(self.name, config, self.egress)
        library = compat.HTTP_LIBRARY  # the one outbound client, in the flavour the SDK's transports take
        if config["transport"] == "sse":
            from mcp.client.sse import sse_client

            def factory(headers: dict[str, str] | None = None, timeout: Any = None, auth: Any = None) -> Any:
                return egress_client(
                    self.egress,
                    headers=headers,
                    timeout=timeout,
                    auth=auth,
                    max_body_bytes=max_result_bytes(config),
                    library=library,
                )

            return await stack.enter_async_context(
                sse_client(url, headers=headers, auth=auth, httpx_client_factory=factory)
            )
        # the SDK's defaults (30 s, 300 s read for streams), plus a transport that notices a broken stream
        timeout = compat.http_module().Timeout(30.0, read=300.0)
        client = await stack.enter_async_context(
            egress_client(
                self.egress,
                wrap=lambda transport: WatchedTransport(
                    transport, self._stream_broke, self._too_large, self._http_refused
                ),
                max_body_bytes=max_result_bytes(config),
                headers=headers,
                timeout=timeout,
                auth=auth,
                library=library,
            )
        )
        return await stack.enter_async_context(compat.streamable_http(url, client))

    async def wait_ready(self, timeout: float | None = None) -> ClientSession:
        """The initialized session; raises `MCPConnectionError` when it could not be opened in time."""
        if timeout is None:
            timeout = float(self.config.get("timeout") or DEFAULT_CONNECT_TIMEOUT_S)
        try:
            return await asyncio.wait_for(asyncio.shield(self._ready), timeout)
        except TimeoutError:
            self._runner.cancel()
            raise MCPConnectionError(
                f"MCP server {self.name!r} ({self.target}) did not complete initialize within {timeout:g} s"
                f"{self._stderr_tail()}"
            ) from None

    async def close(self) -> None:
        """End the session and the transport (for stdio: close stdin, then terminate the process)."""
        self._stop.set()
        if not self._runner.done():
            await asyncio.wait({self._runner}, timeout=CLOSE_TIMEOUT_S)
        if not self._runner.done():
            self._runner.cancel()
            await asyncio.wait({self._runner}, timeout=CLOSE_TIMEOUT_S)
        for task in list(self._background):
            task.cancel()

    def discard(self) -> None:
        """Mark dead and close in the background (the caller does not wait for the teardown)."""
        self.alive = False
        self._spawn(self.close())

    @property
    def target(self) -> str:
        if self.config.get("transport", "stdio") != "stdio":
            return f"url {self.config.get('url')!r}"
        return f"command {self.config.get('command')!r}"

    # -- calls (any task on the background loop) -----------------------------------------------------

    async def request(
        self,
        message: Any,
        result_type: type[R],
        timeout_s: float,
        listener: Listener | None = None,
        hooks: CallHooks | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> R:
        """Send one request (a bare SDK request model: `CallToolRequest`, ...) and return the typed result.

        `listener` hears the server's progress and log notifications for it; `hooks` answer the server's
        sampling, elicitation and roots requests (over 2026-07-28: its `InputRequiredResult`, see
        `echo_tools.mcp.rounds`); `meta` goes into the request's `_meta` (the run's trace context).

        Raises:
            NotSent: the session was dead before the request was sent.
            Lost: the connection broke while the request was in flight.
            ToolTimeoutError: the server did not answer within `timeout_s` (a cancellation is sent).
            ToolExecutionError: the server answered with a JSON-RPC error, or asked for input without end.
        """
        import anyio

        session = self.session
        if not self.alive or session is None:
            raise NotSent(self.error or self._closed_message())
        task = asyncio.current_task()
        assert task is not None
        self._calls.add(task)
        request_id: int | None = None
        key: Any = None
        try:
            async with self._limit:
                self._trim_stderr()
                # 1.x: send_request takes this id before its first await, so reading it here names our
                # request; 2.x needs no id (it cancels by itself): the request carries a key of ours
                request_id = compat.next_request_id(session)
                key = request_id if request_id is not None else f"{id(task):x}-{self._count}"
                with_meta(message, key, meta, listener is not None)
                self._by_id[key] = task
                progress = None
                if listener is not None:
                    self._listeners[key] = listener
                    progress = _progress_callback(listener)
                if hooks is not None:
                    self._hooks[key] = hooks
                return await self._exchange(
                    session, message, result_type, timeout_s, progress, listener, hooks
                )
        except asyncio.CancelledError:
            refused = self._refused.pop(task, None)
            if refused is not None and task.uncancel() == 0:
                raise ToolExecutionError(refused) from None
            if task in self._lost:
                self._lost.discard(task)
                if task.uncancel() == 0:
                    raise Lost(self._lost_message()) from None
            if request_id is not None:
                self._send_cancelled(request_id, "the caller cancelled the request (timeout)")
            raise
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            # the session's streams were closed before our request was written: it never left
            self.discard()
            raise NotSent(self.error or self._closed_message()) from exc
        except ValidationError as exc:  # an answer the negotiated revision does not allow
            raise self._invalid_answer(message, exc) from None
        except compat.MCPError as exc:
            refused = self._refused.pop(task, None)  # 2.x answers a stream we stopped with an error
            if refused is not None:
                task.uncancel()
                raise ToolExecutionError(refused) from None
            raise self._error_answer(exc, request_id, timeout_s) from exc
        finally:
            self._calls.discard(task)
            self._by_id.pop(key, None)
            self._listeners.pop(key, None)
            self._hooks.pop(key, None)

    async def _exchange(
        self,
        session: ClientSession,
        message: Any,
        result_type: Any,
        timeout_s: float,
        progress: Any,
        listener: Listener | None,
        hooks: CallHooks | None,
    ) -> Any:
        async def send() -> Any:
            try:
                return await self._send(session, message, result_type, timeout_s, progress)
            except compat.MCPError as exc:
                # 2026-07-28 HTTP: a tool whose arguments go as Mcp-Param-* headers too, unknown to this
                # session: the spec's recovery, re-list on the session (the SDK then sends them), once
                if compat.error_code(exc) != _HEADER_MISMATCH or message.method != "tools/call":
                    raise
                await relist(session, timeout_s)
                return await self._send(session, message, result_type, timeout_s, progress)

        async def follow(handle: TaskHandle) -> Any:
            return await follow_task(
                self.name, session, self._callbacks, handle, hooks, listener, timeout_s, self._spawn
            )

        return await exchange(self.name, self.config, self._callbacks, message, send, hooks, follow)

    async def _send(
        self, session: ClientSession, message: Any, result_type: Any, timeout_s: float, progress: Any
    ) -> Any:
        """The answer to `message`; a `tools/call` to a server offering the Tasks extension may be answered
        with a task handle (`TaskHandle`), which `exchange` follows."""
        tasks = message.method == "tools/call" and offers_tasks(session)
        answer = await session.send_request(
            compat.client_request(message),
            as_json() if tasks else compat.result_type(result_type),
            request_read_timeout_seconds=compat.read_timeout(timeout_s),
            progress_callback=progress,
        )
        if not tasks:
            return answer
        if answer.get("resultType") == "task":
            return TaskHandle(answer)
        return compat.result_type(result_type).validate_python(answer, by_name=False)

    def _invalid_answer(self, message: Any, exc: ValidationError) -> ToolExecutionError:
        return ToolExecutionError(
            f"MCP server {self.name!r} answered {getattr(message, 'method', 'a request')} with a result "
            f"revision {self.protocol or 'of its session'} does not allow: {first_problem(exc)}"
        )

    def _error_answer(self, exc: Any, request_id: int | None, timeout_s: float) -> Exception:
        """What a JSON-RPC error in answer to a request means: the connection lost, the session expired
        (both end this connection), the SDK's read timeout (a cancellation is sent), or the server's
        refusal."""
        from mcp.types import CONNECTION_CLOSED

        code, text = compat.error_code(exc), compat.error_text(exc)
        if code == CONNECTION_CLOSED:
            self.discard()
            return Lost(self._lost_message())
        if compat.is_session_gone(exc):
            self.discard()
            return NotSent(f"MCP server {self.name!r} no longer knows this session")
        if compat.is_read_timeout(exc):  # the read timeout, a backstop behind the executor's own deadline
            if request_id is not None:
                self._send_cancelled(request_id, "request timed out")
            return ToolTimeoutError(f"MCP server {self.name!r} did not answer within {timeout_s:g} s")
        text = self._status_note(text)
        return ToolExecutionError(f"MCP server {self.name!r} refused the request: {text} (code {code})")

    def _send_cancelled(self, request_id: int, reason: str) -> None:
        # 1.x only: it sends no notifications/cancelled by itself (2.x does, and over 2026-07-28 HTTP it
        # closes the request's stream instead)
        from mcp import types

        session = self.session
        if session is None or not self.alive:
            return
        note = compat.client_notification(
            types.CancelledNotification(
                params=types.CancelledNotificationParams(requestId=request_id, reason=reason)
            )
        )

        async def send() -> None:
            try:
                await session.send_notification(note)
            except Exception as exc:  # boundary: a dying transport cannot carry the notice; nothing to do
                logger.debug(
                    "MCP server %r: cancellation of request %s not sent: %s", self.name, request_id, exc
                )

        self._spawn(send())

    def _stream_broke(self, request: httpx.Request) -> None:
        # The SDK leaves a request pending forever when its response stream breaks without an event id
        # (the server died mid-call): fail that call now and replace the session.
        task = self._by_id.get(compat.request_key_of(request.content))
        if task is not None:
            self._lost.add(task)
            task.cancel()
        self.discard()

    def _http_refused(self, status: int) -> None:
        self._status = status

    def _status_note(self, text: str) -> str:
        # the 2.x SDK turns an HTTP error into "Server returned an error response": say which
        if self._status is not None and "error response" in text and f"HTTP {self._status}" not in text:
            return f"{text} (HTTP {self._status})"
        return text

    def _too_large(self, request: httpx.Request, error: Exception) -> None:
        # the answer to `request` passed max_result_bytes: its reading stopped, and its call fails now
        task = self._by_id.get(compat.request_key_of(request.content))
        if task is not None:
            self._refused[task] = (
                f"MCP server {self.name!r} answered more than {max_result_bytes(self.config)} bytes "
                f"(max_result_bytes of its config): {error}; nothing was kept"
            )
            task.cancel()

    async def _on_message(self, message: Any) -> None:
        from mcp import types

        note = compat.unwrap(message)
        if isinstance(note, types.ToolListChangedNotification):
            if self._on_tools_changed:
                self._on_tools_changed(self.name)
        elif isinstance(note, types.LoggingMessageNotification):
            self._log(note.params)
        elif isinstance(message, Exception):
            # e.g. the late answer to a request we cancelled, or a line that is not JSON-RPC
            logger.debug("MCP server %r: %s", self.name, message)
            if not self._ready.done():  # output that is not JSON-RPC before initialize: not an MCP server
                self.error = (
                    f"MCP server {self.name!r} ({self.target}) is not an MCP server: "
                    f"{_first_line(message, stdio=self.config.get('transport', 'stdio') == 'stdio')}"
                )
                self._runner.cancel()

    def _log(self, params: types.LoggingMessageNotificationParams) -> None:
        # A log message names no request: it belongs to the call in flight; with several in flight on
        # this session, each of them hears it, marked with how many shared the session.
        listeners = list(self._listeners.values())
        entry: dict[str, Any] = {"level": params.level, "logger": params.logger, "data": params.data}
        if len(listeners) > 1:
            entry["calls_in_flight"] = len(listeners)
        if not listeners:
            logger.info("MCP server %r logged (%s): %s", self.name, params.level, params.data)
        for listener in listeners:
            _hear(listener, "log", entry)

    # -- helpers -------------------------------------------------------------------------------------

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = self._loop.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _describe(self, exc: BaseException) -> str:
        leaf = next((e for e in _leaves(exc) if not isinstance(e, asyncio.CancelledError)), exc)
        if isinstance(leaf, FileNotFoundError | PermissionError):
            return f"MCP server {self.name!r}: cannot start {self.target}: {leaf}"
        if isinstance(leaf, ToolConfigError | MCPConnectionError):
            return leaf.message
        text = getattr(getattr(leaf, "error", None), "message", None) or str(leaf) or type(leaf).__name__
        text = self._status_note(text)
        prefix, tail = f"MCP server {self.name!r} ({self.target})", self._stderr_tail()
        if self.session is not None:
            return f"{prefix} failed: {text}{tail}"
        if text == "Connection closed":
            return f"{prefix} closed the connection during initialize{tail}"
        return f"{prefix} could not be {'started' if self.target.startswith('command') else 'reached'}: {text}{tail}"

    def _closed_message(self) -> str:
        return f"MCP server {self.name!r} ({self.target}) closed the connection{self._stderr_tail()}"

    def _lost_message(self) -> str:
        tail = self._stderr_tail()
        return f"MCP server {self.name!r} ({self.target}) closed the connection during the call{tail}"

    def _stderr_tail(self, limit: int = 600) -> str:
        log = self._errlog
        if log is None or log.closed:
            return ""
        try:
            fd = log.fileno()
            end = os.lseek(fd, 0, os.SEEK_END)
            # pread leaves the offset alone: the child process shares this file description
            text = os.pread(fd, limit, max(0, end - limit)).decode("utf-8", "replace").strip()
        except OSError:
            return ""
        return f"; its stderr ends with: {text}" if text else ""

    def _trim_stderr(self) -> None:
        # a long-lived server may log every request to stderr; keep the temp file bounded
        self._count += 1
        if self._errlog is None or self._count % 4096 or self._errlog.closed:
            return
        fd = self._errlog.fileno()
        if os.fstat(fd).st_size > _STDERR_LIMIT:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)


def _hear(listener: Listener, kind: str, entry: dict[str, Any]) -> None:
    try:
        listener(kind, entry)
    except Exception:  # boundary: a listener's failure must not break the session that reported
        logger.exception("MCP %s listener failed", kind)


def _progress_callback(listener: Listener) -> Any:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        _hear(listener, "progress", {"progress": progress, "total": total, "message": message})

    return on_progress


def _first_line(error: Exception, *, stdio: bool) -> str:
    """What a server wrote instead of JSON-RPC, as the SDK's parse error quotes it (one line, bounded);
    for a program on stdio, with what it should have written there."""
    text = str(error)
    found = re.search(r"input_value=('[^']*'|\"[^\"]*\")", text)
    if not stdio:
        return f"it answered {found.group(1)[:120]}" if found else text.splitlines()[0][:160]
    shown = f"it wrote {found.group(1)[:120]} on stdout" if found else text.splitlines()[0][:160]
    return shown + " (an MCP server speaks JSON-RPC on stdout)"


def _package_version() -> str:
    """The installed echo-tools' version, which the MCP client tells servers (`clientInfo.version`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("echo-tools")
    except PackageNotFoundError:  # run from a folder that was never installed
        return "0+unknown"
