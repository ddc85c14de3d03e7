"""/tools/events under hostile clients: the window every stream reads is bounded in bytes, a slow client is
told what it missed, the number of streams is limited (503 with the error contract), and an event is
serialised once whatever the number of clients. Against a real `echo-tools serve` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api.events import DEFAULT_MAX_CLIENTS, EventBroadcaster, TooManyClientsError
from echo_tools.events import ToolEvent
from tests.echo_tools._served import echo_tools_serve, peak_rss_kb

BIG_TEXT = "x" * 900_000


def _length_call(client: httpx.Client, text: str = BIG_TEXT) -> None:
    answer = client.post("/tools/invoke/tool_text_tools", json={"operation": "length", "text": text})
    assert answer.status_code == 200, answer.text


def _until_published(client: httpx.Client) -> None:
    """Block until every event so far reached the stream's window, not just the callers' answers.

    Sinks run off the request path in order (the run history, then the event stream): once a last small
    call's events are in the history, every earlier event has been handed to the stream.
    """
    answer = client.post(
        "/tools/invoke/tool_text_tools",
        params={"run_id": "sentinel"},
        json={"operation": "length", "text": "x"},
    )
    assert answer.status_code == 200, answer.text
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        kept = client.get("/tools/events/history", params={"run_id": "sentinel"}).json()["events"]
        if any(e["type"] == "tool.completed" for e in kept):
            return
        time.sleep(0.05)
    raise AssertionError("the events never reached the history")


async def _read_frame(lines: Any) -> dict[str, Any]:
    """The next SSE frame (comments skipped) as `{event, data}`."""
    frame: dict[str, Any] = {}
    async for line in lines:
        if not line:
            if frame:
                return frame
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(": ")
        frame[field] = json.loads(value) if field == "data" else value
    raise AssertionError("the stream ended")


def test_an_idle_stream_pins_a_bounded_window_not_every_event(tmp_path: Path) -> None:
    async def scenario(url: str, pid: int) -> tuple[int, dict[str, Any]]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as streamer:
            async with streamer.stream("GET", "/tools/events") as stream:
                lines = stream.aiter_lines()
                assert (await _read_frame(lines))["event"] == "ready"
                # the stream is not read while 50 events of about 1 MB each are published (the
                # server's own growth is flat, 38-40 MB from 20 to 150 calls; each kept event adds 1 MB)
                before = peak_rss_kb(pid)
                with httpx.Client(base_url=url, timeout=60) as caller:
                    for _ in range(50):
                        await asyncio.to_thread(_length_call, caller)
                    await asyncio.to_thread(_until_published, caller)
                grown = peak_rss_kb(pid) - before
                # the frames already in the sockets' buffers come first (a few MB); the notice follows them
                for _ in range(400):
                    frame = await _read_frame(lines)
                    if frame["event"] == "dropped":
                        return grown, frame
                return grown, {}

    with echo_tools_serve(tmp_path) as (url, pid):
        grown, dropped = asyncio.run(scenario(url, pid))
    # old behaviour: every event kept for the stalled client (up to 1000), about 140 MB for 150 calls, 90
    # for these 50
    assert grown < 60 * 1024, grown
    assert dropped, "no 'dropped' frame told the slow client what it missed"
    assert dropped["data"]["dropped"] > 0 and dropped["data"]["reason"] == "client too slow"


def test_streams_beyond_the_limit_get_503_with_the_error_contract(tmp_path: Path) -> None:
    async def scenario(url: str) -> None:
        limits = httpx.Limits(max_connections=DEFAULT_MAX_CLIENTS + 10)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
            streams, readers = [], []  # a dropped line reader closes its stream: keep them
            for _ in range(DEFAULT_MAX_CLIENTS):
                stream = await client.send(client.build_request("GET", "/tools/events"), stream=True)
                assert stream.status_code == 200
                readers.append(stream.aiter_lines())
                assert (await _read_frame(readers[-1]))["event"] == "ready"
                streams.append(stream)
            refused = await client.send(client.build_request("GET", "/tools/events"), stream=True)
            assert refused.status_code == 503
            body = json.loads(await refused.aread())
            assert body["error_type"] == "unavailable" and body["field"] == "max_clients"
            assert f"{DEFAULT_MAX_CLIENTS} clients" in body["message"]
            assert (await client.get("/tools/health")).status_code == 200
            await streams.pop().aclose()
            for _ in range(200):  # bounded wait: the server sees the disconnect on its next write or ping
                again = await client.send(client.build_request("GET", "/tools/events"), stream=True)
                if again.status_code == 200:
                    break
                await again.aclose()
                await asyncio.sleep(0.05)
            assert again.status_code == 200
            streams.append(again)
            for stream in streams:
                await stream.aclose()

    with echo_tools_serve(tmp_path) as (url, _pid):
        asyncio.run(scenario(url))


async def test_the_window_is_bounded_in_bytes_and_a_late_reader_is_told_what_it_missed() -> None:
    broadcaster = EventBroadcaster(queue_size=1000, max_bytes=64 * 1024)
    with broadcaster.subscribe() as client:
        for index in range(100):
            broadcaster(ToolEvent(type="tool.invoked", tool_id=f"tool_{index}", input={"text": "y" * 4000}))
        entries = await client.next_entries(1.0)
        assert sum(e.size for e in entries) <= 64 * 1024
        assert entries[-1].data["tool_id"] == "tool_99"
        assert client.pending_drop == 100 - len(entries) == broadcaster.dropped


async def test_one_event_is_serialised_once_for_every_client() -> None:
    broadcaster = EventBroadcaster(max_clients=500)
    clients = [broadcaster.add_client() for _ in range(500)]
    broadcaster(ToolEvent(type="tool.completed", tool_id="tool_a", output={"n": 1}))
    frames = [(await c.next_entries(1.0))[0].frame for c in clients]
    assert all(frame is frames[0] for frame in frames)  # one string, shared
    assert frames[0].startswith("id: ") and "event: tool.completed" in frames[0]
    for client in clients:
        broadcaster.remove_client(client)
    assert broadcaster.client_count == 0


async def test_an_oversized_event_is_sent_without_its_bulk() -> None:
    broadcaster = EventBroadcaster(max_bytes=40_000)
    with broadcaster.subscribe() as client:
        broadcaster(ToolEvent(type="tool.completed", tool_id="tool_a", output={"text": "z" * 50_000}))
        (entry,) = await client.next_entries(1.0)
    assert "output" not in entry.data and "over the stream's frame limit" in entry.data["omitted"]
    assert entry.size < 10_000


async def test_the_client_limit_is_enforced_and_slots_come_back() -> None:
    broadcaster = EventBroadcaster(max_clients=2)
    first, second = broadcaster.add_client(), broadcaster.add_client()
    with pytest.raises(TooManyClientsError, match="2 clients, its limit"):
        broadcaster.add_client()
    broadcaster.remove_client(first)
    broadcaster.remove_client(first)  # twice is harmless
    third = broadcaster.add_client()
    assert broadcaster.client_count == 2
    for client in (second, third):
        broadcaster.remove_client(client)


def test_the_viewer_s_streams_without_a_run_take_slots_too(tmp_path: Path) -> None:
    # issue 35: /ui/api/stream without run_id held no slot (600 held open, threads 4 -> 43)
    async def scenario(url: str) -> None:
        limits = httpx.Limits(max_connections=DEFAULT_MAX_CLIENTS + 10)
        async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
            streams, readers = [], []
            for _ in range(DEFAULT_MAX_CLIENTS):
                stream = await client.send(client.build_request("GET", "/ui/api/stream"), stream=True)
                assert stream.status_code == 200
                readers.append(stream.aiter_lines())
                assert (await _read_frame(readers[-1]))["event"] == "ready"
                streams.append(stream)
            for path in ("/ui/api/stream", "/tools/events"):
                refused = await client.send(client.build_request("GET", path), stream=True)
                assert refused.status_code == 503, path
                body = json.loads(await refused.aread())
                assert body["error_type"] == "unavailable" and body["field"] == "max_clients"
            for stream in streams:
                await stream.aclose()

    with echo_tools_serve(tmp_path) as (url, _pid):
        asyncio.run(scenario(url))
