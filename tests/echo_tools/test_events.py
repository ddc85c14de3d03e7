"""Events and sinks: the event shape, memory / JSONL / logging sinks, isolation of broken sinks, redaction."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

import pytest

from echo_tools.events import (
    REDACTED,
    EventBus,
    JsonlEventLog,
    LoggingEventSink,
    MemoryEventLog,
    ToolEvent,
    is_secret_key,
    redact,
)


def test_an_event_has_an_id_and_a_utc_timestamp_with_z() -> None:
    first, second = ToolEvent(type="tool.invoked"), ToolEvent(type="tool.invoked")
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", first.timestamp)
    assert first.event_id != second.event_id and len(first.event_id) == 32


def test_context_ids_are_plain_attributes_and_to_dict_leaves_out_empty_values() -> None:
    event = ToolEvent(type="tool.completed", tool_id="tool_x", agent_id="agt_1", run_id="run_1", output=[1])
    assert (event.agent_id, event.run_id, event.workflow_id) == ("agt_1", "run_1", None)
    data = event.to_dict()
    assert data["agent_id"] == "agt_1" and data["output"] == [1]
    assert "workflow_id" not in data and "metadata" not in data
    assert json.loads(event.to_json()) == data


def test_to_json_writes_values_json_cannot_hold_as_text() -> None:
    event = ToolEvent(type="tool.completed", output={"path": Path("/tmp/x")})
    assert json.loads(event.to_json())["output"] == {"path": "/tmp/x"}


def test_the_memory_log_keeps_events_in_order() -> None:
    log = MemoryEventLog()
    bus = EventBus([log])
    for kind in ("tool.invoked", "tool.failed", "tool.invoked", "tool.completed"):
        bus.emit(ToolEvent(type=kind))
    assert [e.type for e in log.events] == ["tool.invoked", "tool.failed", "tool.invoked", "tool.completed"]
    assert len(log.of_type("tool.invoked")) == 2
    log.clear()
    assert log.events == []


def test_the_jsonl_log_appends_one_line_per_event(tmp_path: Path) -> None:
    path = tmp_path / "logs" / "events.jsonl"
    bus = EventBus([JsonlEventLog(path)])
    bus.emit(ToolEvent(type="tool.invoked", tool_id="a", input={"q": "x"}))
    bus.emit(ToolEvent(type="tool.completed", tool_id="a", duration_ms=1.5))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(d["type"], d["tool_id"]) for d in lines] == [("tool.invoked", "a"), ("tool.completed", "a")]
    assert lines[1]["duration_ms"] == 1.5


def test_the_logging_sink_logs_failures_as_warnings(caplog: pytest.LogCaptureFixture) -> None:
    bus = EventBus([LoggingEventSink("echo_tools.test_events")])
    with caplog.at_level(logging.INFO, logger="echo_tools.test_events"):
        bus.emit(ToolEvent(type="tool.completed", tool_id="tool_a"))
        bus.emit(ToolEvent(type="tool.timeout", tool_id="tool_b", error="ran past 5 s"))
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.INFO, "tool.completed tool_a "),
        (logging.WARNING, "tool.timeout tool_b ran past 5 s"),
    ]


def test_a_broken_sink_is_logged_and_the_others_still_get_the_event(caplog: pytest.LogCaptureFixture) -> None:
    got: list[str] = []

    def broken(event: ToolEvent) -> None:
        raise RuntimeError("sink is down")

    bus = EventBus([broken, lambda e: got.append(e.type)])
    with caplog.at_level(logging.ERROR, logger="echo_tools.events"):
        bus.emit(ToolEvent(type="tool.invoked"))
    assert got == ["tool.invoked"]
    assert "raised on tool.invoked" in caplog.text and "sink is down" in caplog.text


def test_sinks_can_be_added_and_removed() -> None:
    got: list[str] = []
    sink = got.append
    bus = EventBus()
    bus.emit(ToolEvent(type="tool.invoked"))  # no sinks: nothing to do
    bus.add(lambda e: sink(e.type))
    bus.emit(ToolEvent(type="tool.invoked"))
    bus.remove(bus.sinks[0])
    bus.remove(print)  # not added: no error
    bus.emit(ToolEvent(type="tool.completed"))
    assert got == ["tool.invoked"]


def test_a_sink_that_removes_itself_during_delivery_does_not_skip_the_next_sink() -> None:
    got: list[str] = []
    bus = EventBus()

    def once(event: ToolEvent) -> None:
        bus.remove(once)
        got.append("once")

    bus.add(once)
    bus.add(lambda e: got.append("second"))
    bus.emit(ToolEvent(type="tool.invoked"))
    assert got == ["once", "second"]


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "X-Api-Key",
        "apiKey",
        "Authorization",
        "client_secret",
        "refreshToken",
        "password",
        "token",
        "cookie",
    ],
)
def test_secret_looking_keys_are_secret(key: str) -> None:
    assert is_secret_key(key)


@pytest.mark.parametrize("key", ["max_tokens", "keyboard", "author", "query", "monkey", "primary_key_column"])
def test_harmless_keys_that_contain_secret_words_are_not_secret(key: str) -> None:
    assert not is_secret_key(key)


def test_redact_replaces_secret_values_at_any_depth_and_leaves_the_input_alone() -> None:
    given = {
        "query": "weather",
        "max_tokens": 100,
        "headers": {"Authorization": "Bearer abc", "Accept": "json"},
        "accounts": [{"user": "a", "password": "p1"}, ("x", {"api_key": "k"})],
    }
    assert redact(given) == {
        "query": "weather",
        "max_tokens": 100,
        "headers": {"Authorization": REDACTED, "Accept": "json"},
        "accounts": [{"user": "a", "password": REDACTED}, ["x", {"api_key": REDACTED}]],
    }
    assert given["headers"]["Authorization"] == "Bearer abc"


def test_the_bus_redacts_before_any_sink_sees_the_event() -> None:
    log = MemoryEventLog()
    EventBus([log]).emit(
        ToolEvent(
            type="tool.invoked", input={"token": "t"}, output={"secret": "s"}, metadata={"api_key": "k"}
        )
    )
    (event,) = log.events
    assert (event.input, event.output, event.metadata) == (
        {"token": "***"},
        {"secret": "***"},
        {"api_key": "***"},
    )


def test_redaction_has_one_home_and_copies_only_what_it_changes() -> None:
    from echo_tools import redaction

    assert redact is redaction.redact and is_secret_key is redaction.is_secret_key
    plain = {"query": "q", "nested": [{"limit": 3}]}
    assert redaction.redact(plain) is plain and not redaction.contains_secret(plain)
    secret = {"query": "q", "nested": [{"apiKey": "k"}]}
    assert redaction.redact(secret) == {"query": "q", "nested": [{"apiKey": "***"}]}
    assert secret["nested"][0]["apiKey"] == "k" and redaction.contains_secret(secret)


def test_hidden_values_keep_only_environment_references() -> None:
    from echo_tools.redaction import hide_values

    shown = hide_values({"Authorization": "Bearer abc", "X-Key": "${KEY}", "Mode": "fast"})
    assert shown == {"Authorization": "***", "X-Key": "${KEY}", "Mode": "***"}


def test_an_event_emitted_in_place_never_overtakes_events_still_queued() -> None:
    import threading as _threading

    from echo_tools.events import EventBus, ToolEvent

    gate = _threading.Event()
    seen: list[str] = []

    def slow_sink(event: ToolEvent) -> None:
        gate.wait(10)  # holds the delivery thread until the sync event has been emitted
        seen.append(event.type)

    bus = EventBus([slow_sink])
    bus.emit(ToolEvent(type="tool.invoked"), on_loop=True)  # queued for the delivery thread
    bus.emit(ToolEvent(type="tool.completed"))  # in place would overtake the queued one
    gate.set()
    assert bus.flush(10)
    assert seen == ["tool.invoked", "tool.completed"]


def test_a_forked_child_makes_event_ids_of_its_own() -> None:
    import os as _os

    from echo_tools.events import ToolEvent

    read, write = _os.pipe()
    pid = _os.fork()
    if pid == 0:  # the child: report one id and leave at once
        _os.write(write, ToolEvent(type="tool.invoked").event_id.encode())
        _os._exit(0)
    _os.close(write)
    child_id = _os.read(read, 200).decode()
    _os.waitpid(pid, 0)
    parent_id = ToolEvent(type="tool.invoked").event_id
    assert child_id and child_id[:20] != parent_id[:20]
