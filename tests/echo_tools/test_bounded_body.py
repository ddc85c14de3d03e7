"""Compressed response bodies are decoded under the size limit: zstd, gzip and deflate bombs served by a real
HTTP server on 127.0.0.1 fail (or are cut) at `max_response_bytes`, and the process's memory stays small."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
import zstandard

from AgentTools.http_request.service import HttpRequestService
from AgentTools.web_search.service import WebSearchService
from echo_tools.bounded_body import BoundedDecoder, UndecodableBodyError
from echo_tools.egress import EgressPolicy
from echo_tools.errors import ToolExecutionError
from echo_tools.executor import ToolExecutor
from echo_tools.registry import ToolRegistry
from tests.agent_tools._http_support import Reply, recording_server

ROOT = Path(__file__).resolve().parents[2]
BOMB_BYTES = 128 * 1024 * 1024  # decoded size of each bomb: twice the memory bound asserted below
MB = 1024 * 1024


def _zeros() -> list[bytes]:
    return [bytes(MB)] * (BOMB_BYTES // MB)


@pytest.fixture(scope="module")
def bombs() -> dict[str, bytes]:
    zstd = zstandard.ZstdCompressor(level=3).compressobj()
    # run-length matching finds the same 258-byte matches in zeros as level 9's full search, in 0.24 s of
    # CPU instead of 0.6 s; the body is the same size (130 KB for 128 MiB)
    gz = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16, 9, zlib.Z_RLE)
    zstd_body = b"".join(zstd.compress(chunk) for chunk in _zeros()) + zstd.flush()
    gzip_body = b"".join(gz.compress(chunk) for chunk in _zeros()) + gz.flush()
    return {"zstd": zstd_body, "gzip": gzip_body, "gzip, gzip": gzip.compress(gzip_body)}


def _encoded(body: bytes, encoding: str, content_type: str = "application/json") -> Reply:
    return Reply(body=body, content_type=content_type, headers={"Content-Encoding": encoding})


PAYLOAD = json.dumps({"items": list(range(2000))}).encode()


@pytest.fixture(scope="module")
def server(bombs):
    zstd = zstandard.ZstdCompressor()
    routes = {
        "/bomb/zstd": lambda seen: _encoded(bombs["zstd"], "zstd"),
        "/bomb/gzip": lambda seen: _encoded(bombs["gzip"], "gzip"),
        "/searx/search": lambda seen: _encoded(bombs["gzip"], "gzip"),
        "/bomb/gzip-gzip": lambda seen: _encoded(bombs["gzip, gzip"], "gzip, gzip"),
        "/br": lambda seen: _encoded(b"\x0b\x02\x80hello\x03", "br"),
        "/ok/gzip": lambda seen: _encoded(gzip.compress(PAYLOAD), "gzip"),
        "/ok/zstd": lambda seen: _encoded(zstd.compress(PAYLOAD), "zstd"),
        "/ok/deflate": lambda seen: _encoded(zlib.compress(PAYLOAD), "deflate"),
        "/ok/raw-deflate": lambda seen: _encoded(zlib.compress(PAYLOAD, wbits=-15)[0:], "deflate"),
        "/ok/unknown": lambda seen: _encoded(PAYLOAD, "x-custom"),
        "/accept": lambda seen: Reply(body={"accept": seen.headers.get("accept-encoding")}),
    }
    with recording_server(routes) as running:
        yield running


def _registry(url: str) -> ToolRegistry:
    registry = ToolRegistry(storage_dir=None, egress=EgressPolicy(allow_loopback=True))
    registry.register(
        {
            "name": "Fetch",
            "tool_type": "api",
            "input_schema": {"type": "object", "properties": {}},
            "execution_config": {"url": url, "method": "GET"},
        }
    )
    return registry


async def _invoke_api(url: str, limit: int = 1_000_000):
    executor = ToolExecutor(
        _registry(url), egress=EgressPolicy(allow_loopback=True, max_response_bytes=limit)
    )
    try:
        return await executor.invoke("Fetch", {})
    finally:
        await executor.aclose()


def _in_subprocess(mode: str, url: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.echo_tools._bomb_client", mode, url],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("path, encoding", [("/bomb/zstd", "zstd"), ("/bomb/gzip", "gzip")])
def test_an_api_tool_fails_on_a_compression_bomb_with_memory_bounded(server, path, encoding) -> None:
    outcome = _in_subprocess("api", f"{server.url}{path}")
    # 128 MiB decoded; the call may hold the 1 MB limit and a few buffers, never the bomb
    assert outcome["grown_kb"] < 64 * 1024, outcome
    assert outcome["success"] is False
    assert "exceeds the limit of 1000000 bytes" in outcome["error"]
    assert "max_response_bytes" in outcome["error"] and repr(encoding) in outcome["error"]


def test_the_http_request_tool_cuts_a_zstd_bomb_at_its_limit_with_memory_bounded(server) -> None:
    outcome = _in_subprocess("http_request", f"{server.url}/bomb/zstd")
    assert outcome["grown_kb"] < 64 * 1024, outcome
    assert outcome["truncated"] is True and outcome["size"] == 1_000_000
    assert "max_response_bytes (1000000 bytes" in outcome["note"] and "'zstd'" in outcome["note"]


async def test_every_layer_of_a_double_gzip_bomb_is_bounded(server) -> None:
    result = await _invoke_api(f"{server.url}/bomb/gzip-gzip")
    assert result.error_type == "execution"
    assert "exceeds the limit of 1000000 bytes" in result.error and "'gzip, gzip'" in result.error


async def test_an_encoding_that_cannot_be_bounded_is_refused_by_name(server) -> None:
    result = await _invoke_api(f"{server.url}/br")
    assert result.error_type == "execution"
    assert "Content-Encoding 'br' is refused" in result.error


@pytest.mark.parametrize("path", ["/ok/gzip", "/ok/zstd", "/ok/deflate", "/ok/raw-deflate", "/ok/unknown"])
async def test_ordinary_compressed_bodies_decode_as_before(server, path) -> None:
    result = await _invoke_api(f"{server.url}{path}")
    assert result.success, result.error
    assert result.output == {"items": list(range(2000))}


async def test_only_encodings_that_can_be_bounded_are_asked_for(server, monkeypatch) -> None:
    result = await _invoke_api(f"{server.url}/accept")
    assert result.output == {"accept": "gzip, deflate, zstd"}
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")
    out = await HttpRequestService().request(f"{server.url}/accept")
    assert out["json"] == {"accept": "gzip, deflate, zstd"}


async def test_web_search_fails_on_a_bomb_naming_the_limit(server, monkeypatch) -> None:
    for name in ("ECHO_WEB_SEARCH_PROVIDER", "BRAVE_API_KEY", "GOOGLE_CSE_KEY", "DDG_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ECHO_SEARXNG_URL", f"{server.url}/searx")
    with pytest.raises(ToolExecutionError) as caught:
        await WebSearchService().search("solar", provider="searxng")
    assert "more than 5242880 bytes" in caught.value.message and "'gzip'" in caught.value.message


@pytest.mark.parametrize("encoding", ["gzip", "zstd", "deflate"])
def test_a_decoder_never_returns_more_than_the_limit_whatever_the_chunking(bombs, encoding) -> None:
    body = {"gzip": bombs["gzip"], "zstd": bombs["zstd"], "deflate": zlib.compress(bytes(4 * MB))}[encoding]
    decoder = BoundedDecoder(encoding, 100_000)
    total = 0
    for start in range(0, len(body), 7):
        total += len(decoder.feed(body[start : start + 7]))
        assert total <= 100_000
        if decoder.exceeded:
            break
    assert decoder.exceeded and total == 100_000


def test_a_corrupt_body_and_too_many_layers_are_refused_by_name() -> None:
    with pytest.raises(UndecodableBodyError, match="gzip body is corrupt"):
        BoundedDecoder("gzip", 1000).feed(b"not gzip at all")
    with pytest.raises(UndecodableBodyError, match="4 layers"):
        BoundedDecoder("gzip, gzip, gzip, gzip", 1000)
