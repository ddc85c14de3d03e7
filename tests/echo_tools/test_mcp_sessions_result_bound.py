"""MCP answers are bounded per server (`max_result_bytes`, default 8 MiB) before they are kept: over HTTP
the reading stops at the bound (a real `echo-tools serve` stays within 64 MiB of idle while a server
answers 60 MiB); over stdio the answer is dropped before it becomes an output, an event or history."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from echo_tools.errors import ToolConfigError
from echo_tools.mcp.config import DEFAULT_MAX_RESULT_BYTES, check_server_config
from tests.echo_tools._egress_support import attack, attack_server
from tests.echo_tools._mcp_support import (
    SERVERS,
    HttpServer,
    add_listed_server,
    make_executor,
    make_registry,
    stdio_config,
)

LARGE = SERVERS / "large_server.py"
ROOT = Path(__file__).resolve().parents[2]
MB = 1024 * 1024


@pytest.fixture(scope="module")
def large_http() -> Iterator[HttpServer]:
    running = HttpServer(LARGE).start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, large_http: HttpServer) -> Iterator[tuple[str, int]]:
    storage = tmp_path_factory.mktemp("large-results")
    config = storage / "servers.json"
    config.write_text(json.dumps({"mcpServers": {"large": {"url": large_http.url}}}))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    loaded = subprocess.run(
        [sys.executable, "-m", "echo_tools.cli", "--storage", str(storage), "mcp", "load", str(config)],
        cwd=storage, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    with attack_server(storage) as url_and_pid:
        yield url_and_pid


def test_a_60_mib_answer_over_http_fails_the_call_with_the_server_memory_bounded(served) -> None:
    warm_up = ("POST", "/tools/invoke/id/mcp_large_small", {})
    (answer,) = attack(
        served, ("POST", "/tools/invoke/id/mcp_large_large", {"megabytes": 60}), warm_up=warm_up
    )
    body = answer.json()
    assert body["result"]["success"] is False and body["result"]["output"] is None, answer.text[:500]
    assert f"more than {DEFAULT_MAX_RESULT_BYTES} bytes (max_result_bytes of its config)" in body["message"]
    assert "xxxxxxxx" not in answer.text


async def test_an_answer_over_the_bound_of_a_stdio_server_is_not_kept(tmp_path: Path) -> None:
    registry = make_registry(tmp_path)
    add_listed_server(registry, "large", stdio_config(LARGE, max_result_bytes=MB))
    executor = make_executor(registry)
    try:
        refused = await executor.invoke("mcp_large_large", {"megabytes": 2})
        kept = await executor.invoke("mcp_large_small", {})
    finally:
        await executor.aclose()
    assert refused.success is False and refused.output is None
    # the text and its structured copy: both would have been kept
    assert (
        f"answered {4 * MB + 14} bytes, more than {MB} bytes (max_result_bytes of its config)"
        in refused.error
    )
    assert kept.success is True and kept.output == {"result": "small"}


async def test_an_answer_over_the_bound_of_an_http_server_is_cut_and_the_session_serves_on(
    tmp_path: Path, large_http: HttpServer
) -> None:
    registry = make_registry(tmp_path)
    registry.add_mcp_server("large", {"url": large_http.url, "max_result_bytes": MB})
    executor = make_executor(registry)
    try:
        refused = await executor.invoke("mcp_large_large", {"megabytes": 2})
        kept = await executor.invoke("mcp_large_small", {})
    finally:
        await executor.aclose()
    assert refused.success is False and refused.output is None
    assert f"more than {MB} bytes (max_result_bytes of its config)" in refused.error
    assert kept.success is True and kept.output == {"result": "small"}


@pytest.mark.parametrize("value", [0, -1, "8MB", True, 1.5])
def test_a_bad_max_result_bytes_is_refused_naming_the_field_and_value(value: object) -> None:
    with pytest.raises(ToolConfigError) as caught:
        check_server_config("large", {"url": "https://mcp.example.com/mcp", "max_result_bytes": value})
    assert caught.value.field == "mcpServers.large.max_result_bytes"
    assert repr(value) in caught.value.message
