"""Tools whose side effect a test can count from outside: each call appends one line to a file."""

from __future__ import annotations

import os
from pathlib import Path


def append_line(path: str, line: str) -> int:
    """Append `line` to the file at `path` (one write, so concurrent callers never interleave); returns
    how many lines the file holds now."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)
    return len(Path(path).read_text().splitlines())


def wait_then_write(path: str, release: str) -> str:
    """Wait until the file `release` exists (a test creates it once the call has timed out), then write
    `path`: a thread tool that outlives its deadline."""
    import time

    while not Path(release).exists():
        time.sleep(0.01)
    Path(path).write_text("written after the deadline", encoding="utf-8")
    return "done"
