"""The CLI's side of OAuth 2.1 for MCP servers (`echo-tools mcp add --oauth`, `echo-tools mcp login NAME`).

It prints the authorization URL (and opens a browser with `--open`), then receives the browser's redirect
on the loopback address of the server's `oauth.redirect_uri` (default `http://127.0.0.1:33418/callback`)
and hands the code to the MCP SDK, which exchanges it and keeps the tokens in the credential store.
"""

from __future__ import annotations

import asyncio
import http.server
import ipaddress
import sys
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from echo_tools.errors import MCPConnectionError

if TYPE_CHECKING:
    from echo_tools.registry import ToolRegistry

LOGIN_TIMEOUT_S = 300.0
_PAGE = b"<html><body><p>echo-tools: authorization received; you may close this window.</p></body></html>"


class LoopbackLogin:
    """Redirect and callback handlers for the SDK's `OAuthClientProvider`, for a person at this machine."""

    def __init__(self, *, open_browser: bool = False, timeout_s: float = LOGIN_TIMEOUT_S) -> None:
        self.open_browser = open_browser
        self.timeout_s = timeout_s
        self._received = threading.Event()
        self._query: dict[str, list[str]] = {}
        self._server: http.server.HTTPServer | None = None

    async def redirect(self, authorization_url: str) -> None:
        """Start listening on the redirect URI, then show (or open) the authorization URL."""
        redirect_uri = (parse_qs(urlsplit(authorization_url).query).get("redirect_uri") or [""])[0]
        parts = urlsplit(redirect_uri)
        if parts.scheme != "http" or not _is_loopback(parts.hostname or "") or not parts.port:
            raise MCPConnectionError(
                f"the CLI receives the browser's redirect on a loopback address only, and redirect_uri is "
                f"{redirect_uri!r}: set oauth.redirect_uri to http://127.0.0.1:PORT/callback"
            )
        self._listen(parts.hostname or "127.0.0.1", parts.port, parts.path or "/")
        sys.stdout.write(f"Open this URL in a browser to authorize access:\n  {authorization_url}\n")
        sys.stdout.flush()
        if self.open_browser:
            import webbrowser

            await asyncio.to_thread(webbrowser.open, authorization_url)

    async def callback(self) -> tuple[str, str | None]:
        """Wait (bounded) for the redirect; returns its `(code, state)`."""
        try:
            received = await asyncio.to_thread(self._received.wait, self.timeout_s)
        finally:
            self._stop()
        if not received:
            raise MCPConnectionError(f"no authorization arrived within {self.timeout_s:g} s")
        if "code" not in self._query:
            error = (self._query.get("error") or ["no code"])[0]
            raise MCPConnectionError(f"the authorization was not granted: {error[:80]!r}")
        state = self._query.get("state")
        return self._query["code"][0], state[0] if state else None

    def _listen(self, host: str, port: int, path: str) -> None:
        login = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                if parts.path != path or not login.receive(parse_qs(parts.query)):
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                self.wfile.write(_PAGE)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # the query holds the authorization code: never logged

        self._stop()
        self._received.clear()
        self._server = http.server.HTTPServer((host, port), Handler)
        threading.Thread(target=self._server.serve_forever, name="mcp-oauth-callback", daemon=True).start()

    def receive(self, query: dict[str, list[str]]) -> bool:
        """Take the redirect's query (the first one only); False when one was already taken."""
        if self._received.is_set():
            return False
        self._query = query
        self._received.set()
        return True

    def _stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def install_login(registry: ToolRegistry, *, open_browser: bool = False) -> LoopbackLogin:
    """Make this process's CLI the person's side of OAuth for every server of `registry`."""
    from echo_tools.mcp.auth import set_oauth_handlers

    handlers = LoopbackLogin(open_browser=open_browser)
    set_oauth_handlers(registry, handlers.redirect, handlers.callback)
    return handlers


def login(registry: ToolRegistry, name: str) -> int:
    """Authorize server `name` again (its stored tokens are dropped first) and re-list its tools."""
    from echo_tools.cli.common import CliError
    from echo_tools.mcp.auth import oauth_credential_name
    from echo_tools.mcp.config import check_server_name, server_config

    name = check_server_name(name)
    config = server_config(registry, name)
    if "oauth" not in config:
        raise CliError(
            f"MCP server {name!r} is not configured for OAuth; add it with: echo-tools mcp add {name} "
            f"--url {config.get('url', 'URL')} --oauth",
            code=2,
        )
    registry.credentials.remove(oauth_credential_name(name, config))
    tools = registry.refresh_mcp_server(name)
    sys.stdout.write(f"MCP server {name!r} authorized; {len(tools)} tools\n")
    return 0
