"""The interoperability matrix: echo-tools (on the installed SDK generation: 1.x in `make test`, 2.x in
`make test-mcp2`) against servers built with the SDK 1.x and with 2.x (`mcp_servers/interop_v1.py`,
`interop_v2.py`, real processes), over stdio, stateful streamable HTTP and stateless streamable HTTP, for
each feature: a text tool, a structured-output tool, progress, logs, elicitation, sampling, roots, a
resource and a prompt, plus the protocol revision negotiated.

Every cell passes, or is one of `NOT_IN_PROTOCOL`: a documented "not in this protocol", whose test asserts
what the call does instead (docs/mcp.md, "Both SDK generations", shows the matrix)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from echo_tools import EgressPolicy, MemoryEventLog, ToolContext, ToolExecutor, ToolRegistry
from echo_tools.compat.mcp import GENERATION
from echo_tools.mcp.callbacks import elicitation_handler, sampling_llm
from echo_tools.models import ToolType
from tests.echo_tools._mcp_support import SERVERS, HttpServer, make_registry, stdio_config

CLIENT = GENERATION
SERVER_GENERATIONS = (1, 2)
TRANSPORTS = ("stdio", "http", "stateless")
FEATURES = (
    "protocol", "text", "structured", "progress", "logs", "elicitation", "sampling", "roots", "resource", "prompt",
    "trace",
)  # fmt: skip
ROOT_FOLDER = "/srv/reports"
MODERN, HANDSHAKE = "2026-07-28", "2025-11-25"

# (client, server, transport, feature) -> why the cell is not in the protocol that cell speaks, and what
# the call does instead (asserted by `test_a_cell_not_in_the_protocol_does_what_the_matrix_says`)
NOT_IN_PROTOCOL: dict[tuple[int, int, str, str], str] = {}
for _client in (1, 2):
    for _server in (1, 2):
        if (_client, _server) == (2, 2):
            continue  # 2026-07-28: asks by InputRequiredResult, on any transport (see below)
        for _feature in ("elicitation", "sampling", "roots"):
            # a 2025 revision asks by a request from the server, which a stateless server has no channel for
            NOT_IN_PROTOCOL[(_client, _server, "stateless", _feature)] = (
                "no back-channel on a stateless server"
            )


@dataclass
class Cell:
    server: int
    transport: str
    registry: ToolRegistry
    executor: ToolExecutor
    log: MemoryEventLog
    name: str

    timeout_ms: int | None = None  # a shorter deadline for the cells "not in this protocol"

    def call(self, tool: str, args: dict[str, Any]) -> Any:
        context = ToolContext(timeout_ms=self.timeout_ms) if self.timeout_ms else None
        return self.executor.invoke_sync(f"mcp_{self.name}_{tool}", args, context)

    def events(self, kind: str, tool: str) -> list[Any]:
        return [e for e in self.log.events if e.type == kind and e.tool_id == f"mcp_{self.name}_{tool}"]


CELLS = [(server, transport) for server in SERVER_GENERATIONS for transport in TRANSPORTS]


@pytest.fixture(scope="module", params=CELLS, ids=[f"server{s}-{t}" for s, t in CELLS])
def cell(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cell]:
    server, transport = request.param
    script = SERVERS / f"interop_v{server}.py"
    name = f"v{server}{transport}"
    http: HttpServer | None = None
    if transport == "stdio":
        config: dict[str, Any] = stdio_config(script)
    else:
        http = HttpServer(script).start(*(["--stateless"] if transport == "stateless" else []))
        config = {"url": http.url}
    registry = make_registry(tmp_path_factory.mktemp(name))
    log = MemoryEventLog()
    try:
        registry.add_mcp_server(name, {**config, "roots": [ROOT_FOLDER], "timeout": 30})
        executor = ToolExecutor(registry, egress=EgressPolicy.local(), event_sinks=[log])
        yield Cell(server, transport, registry, executor, log, name)
        executor.close()
    finally:
        if http is not None:
            http.stop()


def _model() -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(content="a short summary")] * 4))


def _text(result: Any) -> Any:
    assert result.success, result.error
    output = result.output
    return output["result"] if isinstance(output, dict) and set(output) == {"result"} else output


def check_protocol(cell: Cell) -> None:
    cell.call("echo", {"text": "open"})
    pool = cell.executor.backend_for(ToolType.MCP).pool  # type: ignore[attr-defined]
    info = pool.session_info(cell.name)
    assert info["protocol"] == (MODERN if (CLIENT, cell.server) == (2, 2) else HANDSHAKE)


def check_text(cell: Cell) -> None:
    assert _text(cell.call("echo", {"text": "hi"})) == "echo: hi"


def check_structured(cell: Cell) -> None:
    assert cell.call("stats", {"values": [1, 2]}).output == {"count": 2, "total": 3.0}


def check_progress(cell: Cell) -> None:
    before = len(cell.events("tool.progress", "count"))
    assert _text(cell.call("count", {"steps": 3})) == "counted 3"
    progress = cell.events("tool.progress", "count")[before:]
    assert [(e.metadata["progress"], e.metadata["total"]) for e in progress] == [(1, 3), (2, 3), (3, 3)]


def check_logs(cell: Cell) -> None:
    assert _text(cell.call("chatty", {"word": "plum"})) == "logged"
    logs = cell.events("tool.log", "chatty")
    assert any("said plum" in str(e.metadata["data"]) for e in logs), [e.metadata for e in logs]


def check_elicitation(cell: Cell) -> None:
    with elicitation_handler(lambda request: {"action": "accept", "content": {"name": "Ada"}}):
        assert _text(cell.call("ask_name", {})) == "hello Ada"


def check_sampling(cell: Cell) -> None:
    with sampling_llm(_model()):
        assert _text(cell.call("summarise", {"text": "q3"})) == "model said: a short summary"


def check_roots(cell: Cell) -> None:
    assert json.loads(_text(cell.call("roots", {}))) == [f"file://{ROOT_FOLDER}"]


def check_resource(cell: Cell) -> None:
    assert cell.call("read_resource", {"uri": "notes://readme"}).output == "interop notes"


def check_prompt(cell: Cell) -> None:
    prompt = cell.call("get_prompt", {"name": "greeting", "arguments": {"name": "Ada"}}).output
    assert [m["content"]["text"] for m in prompt["messages"]] == ["Say hello to Ada"]


def check_trace(cell: Cell) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    span = NonRecordingSpan(
        SpanContext(0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331, False, TraceFlags(1))
    )
    with trace.use_span(span):  # the host's run span
        carried = _text(cell.call("trace", {}))
    assert carried.startswith("00-0af7651916cd43dd8448eb211c80319c-"), carried  # the run's trace id
    outside = cell.call("trace", {})  # no span current: nothing is made up
    assert _text(outside) == "", outside.output


CHECKS: dict[str, Callable[[Cell], None]] = {name: globals()[f"check_{name}"] for name in FEATURES}


@pytest.mark.parametrize("feature", FEATURES)
def test_every_cell_passes_or_is_not_in_its_protocol(cell: Cell, feature: str) -> None:
    why = NOT_IN_PROTOCOL.get((CLIENT, cell.server, cell.transport, feature))
    if why is None:
        CHECKS[feature](cell)
        return
    # a documented "not in this protocol": the call ends (at the latest by its deadline: a 1.x server on a
    # stateless transport waits for an answer that cannot come), and the feature is absent
    cell.timeout_ms = 3000
    try:
        with pytest.raises(AssertionError):
            CHECKS[feature](cell)
    finally:
        cell.timeout_ms = None


def test_the_matrix_names_every_cell_it_leaves_out_with_a_reason() -> None:
    for key, why in NOT_IN_PROTOCOL.items():
        client, server, transport, feature = key
        assert (
            client in (1, 2)
            and server in SERVER_GENERATIONS
            and transport in TRANSPORTS
            and feature in FEATURES
        )
        assert why
    assert not any(key[:2] == (2, 2) for key in NOT_IN_PROTOCOL)  # 2.x with 2.x: every cell passes
