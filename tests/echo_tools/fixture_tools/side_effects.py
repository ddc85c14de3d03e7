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
