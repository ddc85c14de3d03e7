"""`check_llm`: a model's server probed before a run (a real server on 127.0.0.1), or its key looked for."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import tests.workflow_bridge._compiler_support  # noqa: F401  (imports crewai quietly first)
from workflow_bridge.llm import LLMConfigError, check_llm, llm_from_spec

CHUNK = b"x" * (1 << 20)
HUGE_CHUNKS = 64  # 64 MiB: more than any socket buffer holds, so an unread body cannot be all sent


class ModelServer:
    """`/v1/models` answers 401 with a 64 MiB body; `finished` is set once the handler stops writing, and
    `sent_all` says whether every byte went out."""

    def __init__(self) -> None:
        self.finished = threading.Event()
        self.sent_all = False
        self.paths: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the http.server name)
                outer.paths.append(self.path)
                try:
                    self.send_response(401)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(CHUNK) * HUGE_CHUNKS))
                    self.end_headers()
                    for _ in range(HUGE_CHUNKS):
                        self.wfile.write(CHUNK)
                    outer.sent_all = True
                except OSError:
                    pass  # the client closed the connection without reading the body
                finally:
                    outer.finished.set()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def model_server() -> Iterator[ModelServer]:
    server = ModelServer()
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(10)


@pytest.fixture(autouse=True)
def no_llm_settings(monkeypatch):
    for key in ("ECHO_LLM", "ECHO_LLM_MODEL", "ECHO_LLM_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(key, raising=False)


def test_any_answer_counts_as_reachable_and_its_body_is_not_read(model_server):
    check_llm(llm_from_spec(f"{model_server.url}#llama3.1"))
    assert model_server.paths == ["/v1/models"]
    assert model_server.finished.wait(60), "the model server's handler never stopped writing"
    assert model_server.sent_all is False  # the probe closed the connection after the status line


def test_a_server_that_does_not_answer_is_an_error_naming_the_url():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    with pytest.raises(LLMConfigError) as caught:
        check_llm(llm_from_spec(f"{url}#llama3.1"))
    assert f"the server at {url} cannot be reached" in str(caught.value)
    assert "ECHO_LLM" in str(caught.value)


def test_a_provider_model_without_its_key_is_an_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    llm = llm_from_spec("openai/gpt-4o-mini")
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(LLMConfigError, match="OPENAI_API_KEY is not set in the environment"):
        check_llm(llm)


def test_the_rehearsal_model_always_passes():
    check_llm(llm_from_spec("rehearsal"))
