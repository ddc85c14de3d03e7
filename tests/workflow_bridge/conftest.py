"""Fixtures shared by the adapter tests: the fixture-tool catalogue, an event log, an executor on both."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry


@pytest.fixture
def registry() -> ToolRegistry:
    """The catalogue of tests/workflow_bridge/fixture_tools (a fresh in-memory registry)."""
    from tests.workflow_bridge.fixture_tools.catalog import make_registry

    return make_registry()


@pytest.fixture
def log() -> MemoryEventLog:
    return MemoryEventLog()


@pytest.fixture
def executor(registry: ToolRegistry, log: MemoryEventLog) -> Iterator[ToolExecutor]:
    """An executor on `registry` whose events go to `log`."""
    running = ToolExecutor(registry, [log])
    yield running
    running.close()
