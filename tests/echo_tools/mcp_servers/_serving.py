"""How every test MCP server runs: `python SERVER.py` on stdio, `python SERVER.py --http PORT` over streamable
HTTP on 127.0.0.1 (PORT 0 picks a free port; it prints `PORT <n>` once the port is usable), `--stateless`
for a stateless HTTP server (no session: the 2026-07-28 way of serving). Works with a server of either SDK
generation (a 1.x `FastMCP`, a 2.x `MCPServer`)."""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any


def main(mcp: Any, *, sse: bool = False) -> None:
    """Parse the command line and serve `mcp` until the client leaves; `sse`: HTTP serves SSE too."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    parser.add_argument("--stateless", action="store_true", help="a stateless HTTP server (no sessions)")
    options = parser.parse_args()
    if options.http is None:
        mcp.run("stdio")
    else:
        serve_http(mcp, options.http, sse=sse, stateless=options.stateless)
    sys.exit(0)


def serve_http(mcp: Any, port: int, *, sse: bool = False, stateless: bool = False) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    # connections queue in the backlog until uvicorn accepts them, so the port is usable from here on
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    if hasattr(mcp, "settings") and hasattr(mcp.settings, "stateless_http"):  # 1.x FastMCP
        mcp.settings.stateless_http = stateless
        app = mcp.streamable_http_app()  # its lifespan runs the streamable HTTP session manager
    else:  # 2.x MCPServer: transport options go to the app
        app = mcp.streamable_http_app(stateless_http=stateless)
    if sse:
        app.router.routes.extend(mcp.sse_app().routes)  # one process serves both transports
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
