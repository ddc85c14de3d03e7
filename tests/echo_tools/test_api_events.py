"""The pieces behind /tools/events and /tools/metrics: per-client bounded queues fed from any thread,
run-id filtering, de-duplication, SSE framing, Prometheus text, and the settings read from the environment."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from echo_tools.api.events import EventBroadcaster, format_sse, prometheus_text
from echo_tools.errors import ToolConfigError
from echo_tools.events import ToolEvent
from echo_tools.settings import ApiSettings, is_loopback_host


async def test_a_slow_client_loses_its_oldest_events_and_counts_them() -> None:
    broadcaster = EventBroadcaster(queue_size=2)
    with broadcaster.subscribe() as client:
        for index in range(5):
            broadcaster(ToolEvent(type="tool.invoked", tool_id=f"tool_{index}"))
        batch = await client.next_batch(1.0)
        assert [item["tool_id"] for item in batch] == ["tool_3", "tool_4"]
        assert client.dropped == 3 and broadcaster.dropped == 3
    assert broadcaster.client_count == 0
    assert broadcaster.published == 5


async def test_events_from_another_thread_wake_the_client_and_respect_the_run_filter() -> None:
    broadcaster = EventBroadcaster()
    with broadcaster.subscribe(run_id="r1") as client:

        def publish() -> None:
            broadcaster(ToolEvent(type="tool.invoked", tool_id="tool_a", run_id="r2"))
            broadcaster(ToolEvent(type="tool.completed", tool_id="tool_a", run_id="r1"))

        thread = threading.Thread(target=publish)
        thread.start()
        batch = await client.next_batch(5.0)
        thread.join()
        assert [(item["type"], item["run_id"]) for item in batch] == [("tool.completed", "r1")]
        assert await client.next_batch(0.01) == []


async def test_one_event_delivered_by_two_buses_reaches_a_client_once() -> None:
    broadcaster = EventBroadcaster()
    event = ToolEvent(type="tool.registered", tool_id="tool_a")
    with broadcaster.subscribe() as client:
        broadcaster(event)
        broadcaster(event)
        assert len(await client.next_batch(1.0)) == 1


async def test_the_broadcaster_gets_events_emitted_on_a_loop_in_place() -> None:
    from echo_tools.events import EventBus

    broadcaster = EventBroadcaster()
    with broadcaster.subscribe() as client:
        EventBus([broadcaster]).emit(ToolEvent(type="tool.invoked", tool_id="tool_a"), on_loop=True)
        assert broadcaster.published == 1  # delivered before emit returned: no delivery thread in between
        assert [item["tool_id"] for item in await client.next_batch(1.0)] == ["tool_a"]


def test_sse_frames_carry_id_event_and_one_line_of_json() -> None:
    frame = format_sse("tool.completed", {"text": "two\nlines"}, "abc")
    assert frame == 'id: abc\nevent: tool.completed\ndata: {"text": "two\\nlines"}\n\n'


def test_prometheus_text_escapes_labels_and_types_each_metric() -> None:
    text = prometheus_text(
        {
            'tool"x': {
                "calls": 2,
                "failures": 1,
                "timeouts": 0,
                "p50_ms": 1.5,
                "p95_ms": 2.0,
                "p99_ms": 2.0,
                "max_ms": 3.0,
            }
        },
        {"echo_tools_events_dropped_total": 4.0},
    )
    lines = text.splitlines()
    assert 'echo_tools_tool_calls_total{tool_id="tool\\"x"} 2' in lines
    assert 'echo_tools_tool_latency_ms{tool_id="tool\\"x",quantile="0.95"} 2.0' in lines
    assert "# TYPE echo_tools_events_dropped_total counter" in lines
    assert text.endswith("\n")


def test_settings_come_from_the_environment_and_arguments_win(tmp_path: Path) -> None:
    env = {
        "ECHO_TOOLS_API_KEY": "env-key-12345",
        "ECHO_TOOLS_HOME": str(tmp_path),
        "ECHO_TOOLS_CORS_ORIGINS": "https://a.example, https://b.example",
        "ECHO_TOOLS_MAX_BODY_BYTES": "2048",
    }
    settings = ApiSettings.from_env(env, api_key="arg-key-12345")
    assert settings.api_key == "arg-key-12345"
    assert settings.storage_dir == tmp_path
    assert settings.cors_origins == ("https://a.example", "https://b.example")
    assert settings.max_body_bytes == 2048
    assert settings.key_required  # a configured key is always required, even on loopback
    with pytest.raises(ToolConfigError, match="'lots'") as caught:
        ApiSettings.from_env({"ECHO_TOOLS_MAX_BODY_BYTES": "lots"})
    assert caught.value.field == "max_body_bytes"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.9.9.9", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.4", False),
        ("example.com", False),
    ],
)
def test_only_loopback_hosts_count_as_loopback(host: str, loopback: bool) -> None:
    assert is_loopback_host(host) is loopback


def test_a_short_api_key_is_refused() -> None:
    with pytest.raises(ToolConfigError, match="at least 8"):
        ApiSettings(api_key="short").check()
