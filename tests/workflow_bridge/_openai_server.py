"""A real HTTP server on 127.0.0.1 speaking OpenAI's chat-completions API, with scripted tool calls.

Each POST to `/v1/chat/completions` consumes one scripted step: a `str` is the assistant's answer; a list
of `{"name", "arguments"}` is a `tool_calls` message; a callable `step(request) -> str | list` decides from
the request. Requests are recorded (`.requests`, the parsed JSON bodies). Used with CrewAI's real `LLM`
class (`base_url` pointing here, a dummy key) to exercise the native function-calling path end to end.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = str | list[dict[str, Any]] | Callable[[dict[str, Any]], Any]


class ScriptedOpenAIServer:
    """The server; `url` is the base URL to give as `base_url` (it ends in `/v1`)."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(
                        404, {"error": {"message": f"no route {self.path}", "type": "invalid_request_error"}}
                    )
                    return
                self._send(200, server.respond(body, self.headers.get("Authorization", "")))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet test output
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-stub", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def respond(self, body: dict[str, Any], authorization: str) -> dict[str, Any]:
        with self.lock:
            self.requests.append({**body, "_authorization": authorization})
            step: Step = self.steps.pop(0) if self.steps else "Done."
        if callable(step):
            step = step(body)
        if isinstance(step, str):
            message: dict[str, Any] = {"role": "assistant", "content": step}
            finish = "stop"
        else:
            calls = [
                {
                    "id": call.get("id") or f"call_{len(self.requests)}_{i}",
                    "type": "function",
                    "function": {"name": call["name"], "arguments": json.dumps(call.get("arguments", {}))},
                }
                for i, call in enumerate(step)
            ]
            message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "stub"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)


@contextmanager
def scripted_openai_server(steps: list[Step]) -> Iterator[ScriptedOpenAIServer]:
    server = ScriptedOpenAIServer(steps)
    server.start()
    try:
        yield server
    finally:
        server.stop()
