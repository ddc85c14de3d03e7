"""A real MCP server that starts answering only once N of its kind have started (a rendezvous).

`python rendezvous_server.py DIR N NAME`: writes DIR/NAME, waits until DIR holds N files, then serves one
tool `hello` over stdio. Listed one after another, the first server would wait forever; listed at once,
all answer. That proves concurrency without measuring time.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mcp.server.fastmcp import FastMCP

folder, count, name = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
(folder / name).write_text("here")
deadline = time.monotonic() + 60
while len(list(folder.iterdir())) < count and time.monotonic() < deadline:
    time.sleep(0.05)

mcp = FastMCP(name, log_level="WARNING")


@mcp.tool()
def hello() -> str:
    """Say hello."""
    return f"hello from {name}"


if __name__ == "__main__":
    mcp.run()
