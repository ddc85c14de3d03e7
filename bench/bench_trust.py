"""What hostile input costs a real `echo-tools serve` (issue 11, findings 5 and 6): figures, not a test.

Starts the server in its own process on 127.0.0.1 and reads its RSS from /proc while it
- fetches a zstd bomb (512 MiB decoded) through an `api` tool and through `http_request`,
- runs text_tools `regex_replace` / `template` bombs (400 M characters asked for),
- answers `/tools/health` while other clients send catastrophic regexes (`(a|a)*b`),
- runs a tool while 2,000 idle clients try to hold `/tools/events` open.
Every loop is bounded; nothing leaves the machine.

    .venv/bin/python bench/bench_trust.py [--root CHECKOUT]   (--root: measure another checkout, e.g. main)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
MB = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _status(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key} for {pid}")


@contextlib.contextmanager
def serve(root: Path) -> Iterator[tuple[str, int]]:
    """`echo-tools serve` from `root`, loopback egress allowed (the bomb server is on 127.0.0.1)."""
    port = _free_port()
    storage = Path(tempfile.mkdtemp(prefix="bench-trust-"))
    env = {**os.environ, "PYTHONPATH": str(root), "ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK": "1"}
    env.pop("ECHO_TOOLS_API_KEY", None)
    command = [sys.executable, "-m", "echo_tools.cli", "--storage", str(storage), "serve", "--port", str(port),
               "--allow-loopback-egress", "--log-level", "warning"]  # fmt: skip
    process = subprocess.Popen(command, cwd=storage, env=env, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # bounded wait for readiness
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/tools/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        else:
            raise RuntimeError("echo-tools serve did not start")
        yield url, process.pid
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()


@contextlib.contextmanager
def bomb_server() -> Iterator[str]:
    """A loopback HTTP server answering a 512 MiB zstd bomb at /zstd and a gzip one at /gzip."""
    import zstandard

    zeros = [bytes(MB)] * 512
    zstd = zstandard.ZstdCompressor(level=3).compressobj()
    gz = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    bodies = {
        "/zstd": (b"".join(zstd.compress(z) for z in zeros) + zstd.flush(), "zstd"),
        "/gzip": (b"".join(gz.compress(z) for z in zeros) + gz.flush(), "gzip"),
    }

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, encoding = bodies[self.path]
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Encoding", encoding)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        print(
            f"  bombs: zstd {len(bodies['/zstd'][0]) // 1024} KB, gzip {len(bodies['/gzip'][0]) // 1024} KB"
        )
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def rss_during(pid: int, send: Any) -> tuple[int, int, Any]:
    """(RSS before in MB, peak RSS growth in MB, answer) around one request; VmHWM is reset first."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset the peak, so it measures this call
    before = _status(pid, "VmRSS")
    answer = send()
    return before // 1024, (_status(pid, "VmHWM") - before) // 1024, answer


def memory_figures(url: str, pid: int) -> None:
    with httpx.Client(base_url=url, timeout=300) as client, bomb_server() as bombs:
        for encoding in ("zstd", "gzip"):
            tool = {
                "name": f"Bomb {encoding}",
                "tool_type": "api",
                "input_schema": {"type": "object", "properties": {}},
                "execution_config": {"url": f"{bombs}/{encoding}", "method": "GET"},
            }
            registered = client.post("/tools/register", json=tool)
            if registered.status_code != 200:
                print(f"  api tool {encoding}: registration refused {registered.status_code}")
                continue
            tool_id = registered.json()["tool_id"]
            base, grown, answer = rss_during(
                pid, lambda t=tool_id: client.post(f"/tools/invoke/id/{t}", json={})
            )
            print(f"  api tool, {encoding} bomb: RSS {base} MB, peak +{grown} MB; HTTP {answer.status_code}: "
                  f"{answer.json().get('message', '')[:110]}")  # fmt: skip
        call = {"url": f"{bombs}/zstd", "max_response_bytes": 1_000_000}
        base, grown, answer = rss_during(
            pid, lambda: client.post("/tools/invoke/tool_http_request", json=call)
        )
        body = answer.json()
        note = (body.get("output") or {}).get("note") or body.get("message", "")
        print(
            f"  http_request, zstd bomb: RSS {base} MB, peak +{grown} MB; HTTP {answer.status_code}: {note[:110]}"
        )
        bombs_text = {
            "regex_replace": {"operation": "regex_replace", "text": "a" * 100_000, "pattern": "a",
                              "replacement": "b" * 4000},
            "template": {"operation": "template", "template": "$a" * 50_000, "variables": {"a": "x" * 8000}},
        }  # fmt: skip
        for name, call in bombs_text.items():
            base, grown, answer = rss_during(
                pid, lambda call=call: client.post("/tools/invoke/tool_text_tools", json=call)
            )
            print(f"  text_tools {name} (400 M chars asked): RSS {base} MB, peak +{grown} MB; "
                  f"HTTP {answer.status_code}: {answer.json().get('message', '')[:90]}")  # fmt: skip


def health_while_hostile_regex(url: str, seconds: float = 20.0) -> None:
    hostile = {"operation": "regex_extract", "text": "a" * 26, "pattern": "(a|a)*b"}
    stop = threading.Event()
    answers: list[int] = []

    def attacker() -> None:
        with httpx.Client(base_url=url, timeout=120) as client:
            while not stop.is_set():
                with contextlib.suppress(httpx.HTTPError):
                    answers.append(client.post("/tools/invoke/tool_text_tools", json=hostile).status_code)

    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    samples = []
    deadline = time.monotonic() + seconds
    with httpx.Client(base_url=url, timeout=120) as client:
        while time.monotonic() < deadline and len(samples) < 400:
            start = time.perf_counter()
            client.get("/tools/health")
            samples.append((time.perf_counter() - start) * 1000)
            time.sleep(0.02)
    stop.set()
    for thread in threads:
        thread.join(130)
    print(f"  /tools/health while 2 clients send (a|a)*b on 26 a's: median {statistics.median(samples):.1f} ms, "
          f"max {max(samples):.1f} ms over {len(samples)} probes; hostile calls answered: {len(answers)} "
          f"({sorted(set(answers))})")  # fmt: skip


async def _idle_stream(host: str, port: int, held: list[Any], refused: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(f"GET /tools/events HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    if status == 200:
        held.append(writer)  # kept open, never read again: an idle subscriber
    else:
        refused.append(status)
        writer.close()


async def _tool_latency(url: str, n: int = 200) -> float:
    call = {"operation": "length", "text": "hello world"}
    samples = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        for _ in range(n):
            start = time.perf_counter()
            answer = await client.post("/tools/invoke/tool_text_tools", json=call)
            samples.append((time.perf_counter() - start) * 1000)
            assert answer.status_code == 200, answer.text
    return statistics.median(samples)


async def sse_figures(url: str, clients: int = 2000) -> None:
    port = int(url.rsplit(":", 1)[1])
    quiet = await _tool_latency(url)
    held: list[Any] = []
    refused: list[int] = []
    for start in range(0, clients, 100):  # connect in bounded batches
        batch = [
            _idle_stream("127.0.0.1", port, held, refused) for _ in range(start, min(clients, start + 100))
        ]
        await asyncio.gather(*batch, return_exceptions=True)
    loaded = await _tool_latency(url)
    print(f"  tool latency (text_tools length over HTTP, median of 200): {quiet:.2f} ms with no stream, "
          f"{loaded:.2f} ms with {clients} idle clients trying ({len(held)} streams held, "
          f"{len(refused)} refused with {sorted(set(refused))})")  # fmt: skip
    for writer in held:
        writer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, default=HERE.parent, help="checkout whose echo_tools is served")
    parser.add_argument("--skip", action="append", default=[], choices=["memory", "regex", "sse"])
    args = parser.parse_args()
    print(f"bench_trust: serving {args.root.resolve()}")
    if "memory" not in args.skip:
        with serve(args.root) as (url, pid):
            memory_figures(url, pid)
    if "regex" not in args.skip:
        with serve(args.root) as (url, _pid):
            health_while_hostile_regex(url)
    if "sse" not in args.skip:
        with serve(args.root) as (url, _pid):
            asyncio.run(sse_figures(url))


if __name__ == "__main__":
    main()
