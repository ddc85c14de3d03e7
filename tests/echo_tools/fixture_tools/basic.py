"""Small real tools, in every shape the local backend must call."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import datetime
import decimal
import enum
import os
import pathlib
import threading
import time
from typing import Any

from pydantic import BaseModel

# How many times each counting tool ran; tests reset what they use.
COUNTERS: dict[str, int] = {}
CURRENT: dict[str, int] = {}
PEAK: dict[str, int] = {}
_lock = threading.Lock()
FINISHED = threading.Event()
CANCELLED = threading.Event()
STARTED = threading.Event()


def add(a: float, b: float) -> float:
    return a + b


async def async_add(a: float, b: float) -> float:
    await asyncio.sleep(0)
    return a + b


def whole_dict(data: dict[str, Any]) -> dict[str, Any]:
    return {"keys": sorted(data), "type": type(data).__name__}


def whole_unannotated(payload):  # noqa: ANN001 - the unannotated EchoAI shape on purpose
    return {"keys": sorted(payload)}


class Query(BaseModel):
    text: str
    limit: int = 3


def with_model(query: Query) -> dict[str, Any]:
    return {"text": query.text.upper(), "limit": query.limit, "type": type(query).__name__}


class Calculator:
    """EchoAI's {module, class, method} shape; counts instances to show caching."""

    instances = 0

    def __init__(self) -> None:
        Calculator.instances += 1

    def multiply(self, a: float, b: float) -> float:
        return a * b


def as_list(n: int) -> list[int]:
    return list(range(n))


def as_text(word: str) -> str:
    return word * 2


@dataclasses.dataclass
class Point:
    x: int
    y: int


def as_dataclass(x: int, y: int) -> Point:
    return Point(x, y)


def as_model(text: str) -> Query:
    return Query(text=text)


def wrong_output(n: int) -> dict[str, Any]:
    return {"value": str(n)}


def echo(**kwargs: Any) -> dict[str, Any]:
    return kwargs


def flaky(key: str, fail_times: int) -> dict[str, Any]:
    """Fails `fail_times` times per key, then succeeds; counts every attempt."""
    with _lock:
        COUNTERS[key] = COUNTERS.get(key, 0) + 1
        count = COUNTERS[key]
    if count <= fail_times:
        raise RuntimeError(f"attempt {count} failed")
    return {"attempts": count}


def count_calls(key: str) -> int:
    with _lock:
        COUNTERS[key] = COUNTERS.get(key, 0) + 1
        return COUNTERS[key]


def slow_sync(seconds: float) -> str:
    """Sleeps, then sets FINISHED: a test can show the call returned before the work ended."""
    time.sleep(seconds)
    FINISHED.set()
    return "done"


async def slow_async(seconds: float) -> str:
    STARTED.set()
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        CANCELLED.set()
        raise
    return "done"


async def gated(key: str, release: float = 0.05) -> int:
    """Tracks how many calls of `key` run at once (PEAK), yielding so others can overlap."""
    with _lock:
        CURRENT[key] = CURRENT.get(key, 0) + 1
        PEAK[key] = max(PEAK.get(key, 0), CURRENT[key])
    try:
        for _ in range(5):
            await asyncio.sleep(0)
        await asyncio.sleep(release)
    finally:
        with _lock:
            CURRENT[key] -= 1
    return PEAK[key]


def write_pid_and_sleep(pid_file: str, seconds: float) -> str:
    with open(pid_file, "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(seconds)
    return "woke up"


def pid() -> int:
    return os.getpid()


def boom(message: str) -> None:
    raise ValueError(message)


def needs_str(text: str) -> str:
    return text.strip()


def thread_name() -> str:
    return threading.current_thread().name


def login(user: str, password: str) -> None:
    raise PermissionError(f"user {user!r} refused")


class Colour(enum.Enum):
    RED = "red"


def odd_values() -> dict[str, Any]:
    return {
        "when": datetime.date(2026, 1, 2),
        "tags": {"only"},
        "colour": Colour.RED,
        "raw": b"bytes",
        "price": decimal.Decimal("1.5"),
        "where": pathlib.PurePosixPath("/tmp/x"),
    }


def type_error_inside(word: str) -> str:
    return word + 1  # type: ignore[operator]  # a TypeError raised by the tool's own code


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="unset")


def read_request_id() -> str:
    return REQUEST_ID.get()


def raise_timeout(host: str) -> None:
    raise TimeoutError(f"connecting to {host} timed out")  # the tool's own failure, not the call's deadline


HOLD = threading.Event()  # released by the test that holds calls
HELD: dict[str, int] = {}
ALL_HELD = threading.Event()


def held(key: str, until: int) -> str:
    """Waits for HOLD (at most 30 s); sets ALL_HELD once `until` calls of `key` are waiting at once."""
    with _lock:
        HELD[key] = HELD.get(key, 0) + 1
        if HELD[key] >= until:
            ALL_HELD.set()
    HOLD.wait(30)
    return "released"


def long_text(chars: int) -> str:
    """Readable text of exactly `chars` characters."""
    return ("lorem ipsum " * (chars // 12 + 1))[:chars]


def picture(size: int) -> dict[str, Any]:
    """An image as MCP tools return it: base64 data with its MIME type, and a caption."""
    import base64

    data = base64.b64encode(bytes(range(256)) * (size // 256 + 1))[: size * 4 // 3].decode()
    return {"caption": "a chart", "image": {"type": "image", "mimeType": "image/png", "data": data}}


def data_uri(size: int) -> str:
    import base64

    return "data:image/png;base64," + base64.b64encode(os.urandom(size)).decode()
