"""The OpenTelemetry sink: one span per finished call, with the call's ids, status and duration."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from echo_tools.events import ToolEvent
from echo_tools.otel import OpenTelemetrySink


@pytest.fixture
def spans(monkeypatch):
    monkeypatch.setenv("OTEL_SDK_DISABLED", "false")  # echo_tools sets it to true by default
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OpenTelemetrySink(provider.get_tracer("test"))
    yield sink, exporter
    provider.shutdown()


def _event(kind: str, **fields) -> ToolEvent:
    base = {
        "tool_id": "tool_add",
        "tool_name": "add",
        "tool_type": "local",
        "run_id": "run_1",
        "agent_id": "agt_a",
    }
    return ToolEvent(type=kind, timestamp="2026-11-22T00:00:01.500000Z", **{**base, **fields})


def test_a_completed_call_becomes_one_span_with_its_ids_and_duration(spans):
    sink, exporter = spans
    sink(_event("tool.invoked"))
    sink(_event("tool.completed", duration_ms=250.0, attempts=1))
    (span,) = exporter.get_finished_spans()
    assert span.name == "tool add"
    assert (
        span.attributes["echo_tools.run_id"] == "run_1" and span.attributes["echo_tools.agent_id"] == "agt_a"
    )
    assert span.end_time - span.start_time == 250_000_000
    assert span.status.status_code != StatusCode.ERROR


def test_failures_and_timeouts_are_error_spans_naming_the_error(spans):
    sink, exporter = spans
    sink(_event("tool.failed", duration_ms=1.0, error="input.a: bad", error_type="validation"))
    sink(_event("tool.timeout", duration_ms=500.0, error="timed out", error_type="timeout"))
    failed, timed_out = exporter.get_finished_spans()
    assert failed.status.status_code == StatusCode.ERROR and failed.status.description == "input.a: bad"
    assert failed.attributes["echo_tools.error_type"] == "validation"
    assert timed_out.attributes["echo_tools.outcome"] == "tool.timeout"


def test_the_sink_attached_to_an_executor_traces_a_real_call(spans):
    from tests.echo_tools._executor_support import local_tool, make_executor

    sink, exporter = spans
    executor, _ = make_executor(local_tool("add", "add"))
    executor.add_sink(sink)
    assert executor.invoke_sync("add", {"a": 1, "b": 2}).success
    (span,) = exporter.get_finished_spans()
    assert span.attributes["echo_tools.tool_id"] == "tool_add"
    assert span.end_time >= span.start_time
