"""A real HTTP server on 127.0.0.1 for the tool tests: routes by path, records every request."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    params: dict[str, str]
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    """What a route answers."""

    status: int = 200
    body: Any = b""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    def encoded(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode()
        return json.dumps(self.body).encode()


Route = Callable[[Seen], Reply]


class RecordingServer:
    """`routes` maps a path to a function of the request; `seen` lists every request in order."""

    def __init__(self, routes: dict[str, Route]) -> None:
        self.routes = routes
        self.seen: list[Seen] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                seen = Seen(
                    self.command,
                    parts.path,
                    {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()},
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length) if length else b"",
                )
                outer.seen.append(seen)
                route = outer.routes.get(parts.path)
                reply = route(seen) if route else Reply(404, {"error": "no route"})
                data = reply.encoded()
                self.send_response(reply.status)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Content-Length", str(len(data)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle

            def log_message(self, format: str, *args: Any) -> None:
                return

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # `shutdown()` waits for the loop's next poll: 0.5 s by default, at every test's teardown
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"


@contextmanager
def recording_server(routes: dict[str, Route]) -> Iterator[RecordingServer]:
    """A started `RecordingServer`, shut down on exit."""
    server = RecordingServer(routes)
    server._thread.start()
    try:
        yield server
    finally:
        server._server.shutdown()
        server._thread.join(timeout=5)
        server._server.server_close()
