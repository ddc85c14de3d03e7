"""Streaming tools: generator and async generator tools emit `tool.output.delta` events; bounds apply."""

from __future__ import annotations

import asyncio
import threading

from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry
from echo_tools.cli.output import describe


def setup() -> tuple[ToolRegistry, ToolExecutor, MemoryEventLog]:
    registry = ToolRegistry()
    log = MemoryEventLog()
    return registry, ToolExecutor(registry, event_sinks=[log]), log


def test_a_generator_tool_streams_each_chunk_and_returns_the_joined_text():
    registry, executor, log = setup()

    def count_words(text: str):
        """Say each word as it is counted."""
        for n, word in enumerate(text.split(), 1):
            yield f"{n}:{word} "

    registry.add(count_words)
    result = executor.invoke_sync("count_words", {"text": "a b c"})

    assert result.success and result.output == "1:a 2:b 3:c "
    kinds = [(e.type, e.output) for e in log.events]
    assert kinds == [
        ("tool.invoked", None),
        ("tool.output.delta", "1:a "),
        ("tool.output.delta", "2:b "),
        ("tool.output.delta", "3:c "),
        ("tool.completed", "1:a 2:b 3:c "),
    ]
    assert [e.metadata["chunk"] for e in log.events if e.type == "tool.output.delta"] == [1, 2, 3]
    assert describe(log.events[1].to_dict()).startswith("output.delta count_words  -> 1:a")


async def test_an_async_generator_of_objects_returns_the_list_of_chunks():
    registry, executor, log = setup()

    async def rows(n: int):
        for i in range(n):
            yield {"row": i}

    registry.add(rows)
    result = await executor.invoke("rows", {"n": 2})
    await executor.aclose()
    assert result.output == [{"row": 0}, {"row": 1}]
    assert [e.output for e in log.events if e.type == "tool.output.delta"] == [{"row": 0}, {"row": 1}]


def test_a_stream_past_max_output_chars_stops_and_says_so():
    registry, executor, log = setup()
    closed = threading.Event()

    def endless():
        try:
            while True:
                yield "12345"
        finally:
            closed.set()

    registry.add(endless, max_output_chars=12)
    result = executor.invoke_sync("endless", {})

    assert result.error_type == "execution"
    assert "stream passed max_output_chars (12) at chunk 3; the stream was stopped" in result.error
    assert closed.is_set()
    assert [e.type for e in log.events].count("tool.output.delta") == 2


async def test_a_stream_past_its_timeout_stops_and_says_so():
    registry, executor, log = setup()
    closed = asyncio.Event()

    async def stalls():
        try:
            yield "first"
            await asyncio.Event().wait()  # never set: only the timeout ends it
            yield "never"
        finally:
            closed.set()

    registry.add(stalls, timeout_ms=200)
    result = await executor.invoke("stalls", {})
    await executor.aclose()

    assert result.error_type == "timeout" and "200" in result.error
    assert closed.is_set()
    assert [e.type for e in log.events] == ["tool.invoked", "tool.output.delta", "tool.timeout"]


def test_the_http_event_stream_carries_the_chunks(tmp_path):
    import httpx

    from echo_tools.api import create_app
    from echo_tools.settings import ApiSettings
    from tests.echo_tools._api_support import serve_in_thread
    from tests.echo_tools.test_api_server import sse_frames

    registry, executor, _ = setup()

    def spell(word: str):
        """Spell a word."""
        yield from word

    registry.add(spell)
    app = create_app(registry, executor, ApiSettings(sse_ping_seconds=0.5))
    with serve_in_thread(app) as url, httpx.Client(base_url=url, timeout=10) as client:
        with client.stream("GET", "/tools/events", params={"run_id": "r1", "max_events": 4}) as stream:
            frames = sse_frames(stream.iter_lines())
            assert next(frames)["event"] == "ready"
            done = client.post("/tools/invoke/spell", params={"run_id": "r1"}, json={"word": "ok"})
            events = [next(frames) for _ in range(4)]
    executor.close()
    assert done.json()["output"] == "ok"
    assert [(e["event"], e["data"].get("output")) for e in events] == [
        ("tool.invoked", None),
        ("tool.output.delta", "o"),
        ("tool.output.delta", "k"),
        ("tool.completed", "ok"),
    ]
