"""A tiny offline search server that speaks SearXNG's JSON API over a bundled corpus.

The sample workflows start it so that `web_search` runs offline: point `ECHO_SEARXNG_URL` at it. Results
are ranked with BM25 over the bundled `corpus.json` (or documents you pass). Run it by hand with
`python -m AgentTools.web_search.local_server --port 8888`.
"""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from AgentTools.file_reader.textops import bm25_rank

CORPUS_PATH = Path(__file__).with_name("corpus.json")
PAGE_SIZE = 10


def load_corpus(path: Path = CORPUS_PATH) -> list[dict[str, str]]:
    """The bundled documents: `[{title, url, content}]`."""
    return list(json.loads(path.read_text(encoding="utf-8"))["documents"])


def search_documents(documents: list[dict[str, str]], query: str) -> list[tuple[dict[str, str], float]]:
    """Every document that matches a word of `query`, best first."""
    texts = [f"{d['title']} {d['title']} {d['content']}" for d in documents]  # titles count double
    return [(documents[i], score) for i, score in bm25_rank(texts, query, top_k=len(texts))]


def searxng_response(documents: list[dict[str, str]], query: str, page: int) -> dict[str, Any]:
    """The JSON body SearXNG returns for `/search?format=json`."""
    ranked = search_documents(documents, query)
    window = ranked[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    return {
        "query": query,
        "number_of_results": len(ranked),
        "results": [
            {
                "url": d["url"],
                "title": d["title"],
                "content": d["content"],
                "engine": "echo-local",
                "score": s,
                "category": "general",
                "positions": [(page - 1) * PAGE_SIZE + n + 1],
            }
            for n, (d, s) in enumerate(window)
        ],
        "answers": [],
        "corrections": [],
        "infoboxes": [],
        "suggestions": [],
        "unresponsive_engines": [],
    }


class _Handler(BaseHTTPRequestHandler):
    server: _SearchHTTPServer

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        params = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        if parts.path == "/healthz":
            return self._send(200, {"status": "ok", "documents": len(self.server.documents)})
        if parts.path != "/search":
            return self._send(404, {"error": f"no route {parts.path!r}; use /search?q=...&format=json"})
        if params.get("format") != "json":
            return self._send(403, {"error": "only format=json is enabled on this server"})
        page = int(params["pageno"]) if params.get("pageno", "").isdigit() else 1
        self.server.requests.append(params)
        return self._send(200, searxng_response(self.server.documents, params.get("q", ""), max(1, page)))

    def _send(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the demo prints its own progress
        return


class _SearchHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], documents: list[dict[str, str]]) -> None:
        super().__init__(address, _Handler)
        self.documents = documents
        self.requests: list[dict[str, str]] = []


class LocalSearchServer:
    """The offline search server, run in a daemon thread.

    Args:
        host: interface to bind (loopback by default).
        port: 0 picks a free port.
        documents: `[{title, url, content}]`; the bundled corpus when None.
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, documents: list[dict[str, str]] | None = None
    ) -> None:
        self._server = _SearchHTTPServer((host, port), documents if documents is not None else load_corpus())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The base URL to put in `ECHO_SEARXNG_URL`."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def requests(self) -> list[dict[str, str]]:
        """The query parameters of every search served, in order."""
        return self._server.requests

    def start(self) -> str:
        """Start serving in a daemon thread; returns the base URL."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever, name="echo-local-search", daemon=True
            )
            self._thread.start()
        return self.url

    def stop(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()


@contextmanager
def running_local_search(documents: list[dict[str, str]] | None = None) -> Iterator[LocalSearchServer]:
    """`with running_local_search() as server:` a started server, stopped on exit."""
    server = LocalSearchServer(documents=documents)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    """Command line: serve the bundled corpus until interrupted."""
    parser = argparse.ArgumentParser(
        description="Offline SearXNG-compatible search server over a bundled corpus"
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8888)
    args = parser.parse_args(argv)
    server = LocalSearchServer(args.host, args.port)
    print(f"serving {len(server._server.documents)} documents at {server.url}")
    print(f"use it with: ECHO_WEB_SEARCH_PROVIDER=searxng ECHO_SEARXNG_URL={server.url}")
    try:
        server._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()


if __name__ == "__main__":
    main()
