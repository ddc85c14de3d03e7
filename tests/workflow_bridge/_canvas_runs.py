"""Shared inputs of the run tests: a canvas without `workflow_id` (Start -> Agent -> HITL -> Agent -> End,
as a canvas posted to `/workflows/run` or passed to `echo-tools run` usually is), and a local HTTP server
that counts the requests it receives (the second agent's tool call, seen from outside)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ADD = {"operation": "add", "values": [2, 3]}
MULTIPLY = {"operation": "multiply", "values": [6, 7]}


def gated_canvas(
    second: dict[str, Any] | None = None, *, second_tool: str = "tool_calculator"
) -> dict[str, Any]:
    """Start -> Adder (calculator) -> HITL -> a second agent (`second_tool` with `second` as its task's
    JSON) -> End; no `workflow_id`."""
    task = json.dumps(second if second is not None else MULTIPLY)
    return {
        "workflow_name": "Add, ask, then act",
        "canvas_nodes": [
            {"id": 1, "type": "Start", "name": "Start"},
            {
                "id": 2,
                "type": "Agent",
                "name": "Adder",
                "config": {"prompt": f"Add: {json.dumps(ADD)}", "tools": [{"tool_id": "tool_calculator"}]},
            },
            {"id": 3, "type": "HITL", "name": "Gate", "config": {"reviewTitle": "Go on?"}},
            {
                "id": 4,
                "type": "Agent",
                "name": "Actor",
                "config": {"prompt": f"Do it: {task}", "tools": [{"tool_id": second_tool}]},
            },
            {"id": 5, "type": "End", "name": "End"},
        ],
        "connections": [{"from": i, "to": i + 1} for i in range(1, 5)],
    }


class _Counter(BaseHTTPRequestHandler):
    hits: list[str]

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        length = int(self.headers.get("Content-Length") or 0)
        self.server.hits.append(self.rfile.read(length).decode())  # type: ignore[attr-defined]
        body = b'{"shipped": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        pass


@contextmanager
def hit_counter() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server on 127.0.0.1: yields (its URL, the bodies POSTed to it so far)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counter)
    server.hits = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/ship", server.hits  # type: ignore[attr-defined]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
