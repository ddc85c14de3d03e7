"""Fixtures shared by the echo_tools tests."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from ._cli_support import InProcessCli

if TYPE_CHECKING:
    from echo_tools import MemoryEventLog, ToolExecutor, ToolRegistry

    from ._mcp_auth_support import AuthServers
    from ._mcp_support import HttpServer


@pytest.fixture
def run_cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Iterator[InProcessCli]:
    """`run_cli(home, *args)`: the `echo-tools` command in-process over the storage `home`; returns a
    `CliResult` (exit code, stdout, stderr).

    `run` adds a filter to the workflow runner's logger (it drops the log copy of the rehearsal notice);
    it is taken off again, so an in-process run leaves later tests' logging as it found it.
    """
    logger = logging.getLogger("workflow_bridge.runner")
    filters = list(logger.filters)
    try:
        yield InProcessCli(monkeypatch, capsys)
    finally:
        logger.filters[:] = filters


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh Fernet key in ECHO_TOOLS_SECRET_KEY for the test: the credential store can encrypt."""
    from echo_tools.credentials import SECRET_KEY_ENV, new_key

    value = new_key()
    monkeypatch.setenv(SECRET_KEY_ENV, value)
    return value


@pytest.fixture(scope="session")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ToolRegistry, ToolExecutor]]:
    """The reference server-everything, discovered once, and one executor (so one server process) for the
    session: the tests only call its tools; a test that reads events adds its own sink for its calls."""
    from ._mcp_support import everything_config, make_executor, make_registry

    registry = make_registry(tmp_path_factory.mktemp("everything"))
    registry.add_mcp_server("everything", everything_config())
    executor = make_executor(registry)
    yield registry, executor
    executor.close()


@pytest.fixture(scope="session")
def asking_http() -> Iterator[HttpServer]:
    """`asking_server.py` over streamable HTTP for the session: its tools keep no state between calls."""
    from ._mcp_support import SERVERS, HttpServer

    server = HttpServer(SERVERS / "asking_server.py").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def asking_stdio(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ToolRegistry, ToolExecutor, MemoryEventLog]]:
    """`asking_server.py` over stdio (a sampling budget of 200 tokens) from its cached listing, one executor
    (so one server process) and its event log, for the session: the server asks whatever model or handler
    is bound to each call, so the tests share the process. Tests take it through `asking`."""
    from echo_tools import EgressPolicy, MemoryEventLog, ToolExecutor

    from ._mcp_support import SERVERS, add_listed_server, make_registry, stdio_config

    registry = make_registry(tmp_path_factory.mktemp("asking"))
    add_listed_server(registry, "asking", stdio_config(SERVERS / "asking_server.py", sampling_max_tokens=200))
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log], egress=EgressPolicy.local())
    yield registry, executor, log
    executor.close()


@pytest.fixture
def asking(
    asking_stdio: tuple[ToolRegistry, ToolExecutor, MemoryEventLog],
) -> tuple[ToolRegistry, ToolExecutor, MemoryEventLog]:
    """The session's asking server registry and executor, with the event log emptied for this test."""
    asking_stdio[2].clear()
    return asking_stdio


@pytest.fixture(scope="session")
def auth_servers() -> Iterator[AuthServers]:
    """The authenticating MCP test servers (`auth_server.py`, one process per mode) for the session."""
    from ._mcp_auth_support import AuthServers

    servers = AuthServers()
    yield servers
    servers.stop()
