"""Shared pieces of the HTTP API and CLI tests: small real tools, a registry around them, a real server.

The tool functions below are registered as `local` tools (this module is added to `allowed_modules`), so
every call in the tests runs through the real executor and local backend.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MODULE = __name__
RELEASE = threading.Event()  # set by a test to let `wait_for_release` return
ENTERED = threading.Event()  # set by `wait_for_release` when a call is inside it


def echo(text: str) -> dict[str, Any]:
    """Returns its input."""
    return {"echo": text}


def add(a: float, b: float) -> dict[str, Any]:
    return {"sum": a + b}


def explode(text: str) -> dict[str, Any]:
    raise RuntimeError(f"tool exploded on {text!r}")


def sleepy(seconds: float) -> dict[str, Any]:
    time.sleep(seconds)
    return {"slept": seconds}


def touch(path: str, text: str = "ran") -> dict[str, Any]:
    """Writes `text` to the file `path`: a side effect a test can look for."""
    Path(path).write_text(text, encoding="utf-8")
    return {"written": path}


def wait_for_release(text: str = "") -> dict[str, Any]:
    ENTERED.set()
    released = RELEASE.wait(30)
    return {"released": released, "text": text}


def local_tool(name: str, function: str, properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """A `local` tool definition calling one function of this module."""
    return {
        "name": name,
        "description": f"Test tool {name}",
        "tool_type": "local",
        "input_schema": {"type": "object", "properties": properties, "required": list(properties)},
        "execution_config": {"module": MODULE, "function": function, **extra.pop("config", {})},
        "tags": ["test"],
        **extra,
    }


ECHO = local_tool("Echo", "echo", {"text": {"type": "string"}}, side_effect="pure")
ADD = local_tool("Adder", "add", {"a": {"type": "number"}, "b": {"type": "number"}})
EXPLODE = local_tool("Exploder", "explode", {"text": {"type": "string"}})
SLEEPY = local_tool("Sleepy", "sleepy", {"seconds": {"type": "number"}}, timeout_ms=200)
GUARDED = local_tool("Guarded", "echo", {"text": {"type": "string"}}, permissions=["fs:write"])
WAITER = local_tool("Waiter", "wait_for_release", {"text": {"type": "string"}})
WAITER["input_schema"]["required"] = []
TOUCH = local_tool("Touch", "touch", {"path": {"type": "string"}})
INLINE_ECHO = local_tool("Fast Echo", "echo", {"text": {"type": "string"}}, config={"isolation": "inline"})


def make_registry(storage: Path | None, *tools: dict[str, Any]) -> Any:
    """A registry storing in `storage`, allowed to run this module's tools, holding `tools`."""
    from echo_tools.egress import EgressPolicy
    from echo_tools.registry import ToolRegistry

    registry = ToolRegistry(
        storage_dir=storage,
        allowed_modules=("AgentTools", MODULE),
        egress=EgressPolicy(),
    )
    for tool in tools:
        registry.register(tool)
    return registry


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def serve_in_thread(app: Any, *, ready_timeout: float = 15.0) -> Iterator[str]:
    """Run `app` with a real uvicorn server on 127.0.0.1 in a thread; yields the base URL."""
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + ready_timeout
    while not server.started:  # bounded wait for readiness
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"uvicorn did not start on port {port} within {ready_timeout} s")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
