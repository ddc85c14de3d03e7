"""An MCP server over streamable HTTP on 127.0.0.1 that demands authentication (for the mcp_auth tests).

`python auth_server.py static`: every request (streamable HTTP at `/mcp`, SSE at `/sse`) needs one of the secrets in the environment
(`AUTH_BEARER` as a bearer token, `AUTH_API_KEY` in `X-Api-Key`, `AUTH_USER`/`AUTH_PASSWORD` as basic, or
a token its own OAuth2 client-credentials endpoint `/oauth/token` issued to `AUTH_CLIENT_ID` /
`AUTH_CLIENT_SECRET`). `/oauth/broken` answers 500; `POST /oauth/revoke` forgets the issued tokens;
`GET /stats` counts token requests. Anything else is 401.

`python auth_server.py oauth`: OAuth 2.1 through the SDK's own server side (protected-resource and
authorization-server metadata, dynamic registration, /authorize approving at once, /token with PKCE and
refresh); `GET /stats` counts code and refresh grants. `oauth-localhost` names its authorization server
`http://localhost:<port>` (another host for the egress policy).

It prints `PORT <n>` once it listens.
"""

from __future__ import annotations

import base64
import os
import secrets
import socket
import sys
import time
from typing import Any

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.fastmcp import FastMCP
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

STATS: dict[str, int] = {"token_requests": 0, "code_grants": 0, "refresh_grants": 0}


def tools(mcp: FastMCP) -> None:
    @mcp.tool()
    def ping() -> str:
        """Answer pong."""
        return "pong"


# -- static credentials ------------------------------------------------------------------------------


def static_app(port: int) -> Any:
    mcp = FastMCP("auth-static", host="127.0.0.1", port=port)
    tools(mcp)
    issued: set[str] = set()
    env = os.environ

    @mcp.custom_route("/oauth/token", methods=["POST"])
    async def token(request: Request) -> Response:
        STATS["token_requests"] += 1
        expected = "Basic " + base64.b64encode(
            f"{env['AUTH_CLIENT_ID']}:{env['AUTH_CLIENT_SECRET']}".encode()
        ).decode("ascii")
        form = await request.form()
        if request.headers.get("authorization") != expected or form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        value = secrets.token_urlsafe(16)
        issued.add(value)
        return JSONResponse({"access_token": value, "token_type": "bearer", "expires_in": 3600})

    @mcp.custom_route("/oauth/broken", methods=["POST"])
    async def broken(request: Request) -> Response:
        STATS["token_requests"] += 1
        return JSONResponse({"error": "server_error"}, status_code=500)

    @mcp.custom_route("/oauth/revoke", methods=["POST"])
    async def revoke(request: Request) -> Response:
        issued.clear()
        return JSONResponse({"revoked": True})

    @mcp.custom_route("/stats", methods=["GET"])
    async def stats(request: Request) -> Response:
        return JSONResponse(STATS)

    inner, sse = mcp.streamable_http_app(), mcp.sse_app()
    accepted = {
        f"Bearer {env['AUTH_BEARER']}",
        "Basic " + base64.b64encode(f"{env['AUTH_USER']}:{env['AUTH_PASSWORD']}".encode()).decode("ascii"),
    }

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        guarded = scope["type"] == "http" and scope["path"].startswith(("/mcp", "/sse", "/messages"))
        if guarded:
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
            given = headers.get("authorization", "")
            ok = (
                given in accepted
                or headers.get("x-api-key") == env["AUTH_API_KEY"]
                or (given.startswith("Bearer ") and given[7:] in issued)
            )
            if not ok:
                response = JSONResponse({"error": "unauthorized"}, status_code=401)
                await response(scope, receive, send)
                return
        if guarded and not scope["path"].startswith("/mcp"):
            await sse(scope, receive, send)
            return
        await inner(scope, receive, send)

    return app


# -- OAuth 2.1 through the SDK ---------------------------------------------------------------------


class ApprovingProvider:
    """An authorization server that approves every authorization request at once (no person)."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + 3600,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(
            token=refresh, client_id=client_id, scopes=scopes, resource=resource
        )
        return OAuthToken(
            access_token=access,
            token_type="Bearer",
            expires_in=3600,
            refresh_token=refresh,
            scope=" ".join(scopes),
        )

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        STATS["code_grants"] += 1
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id or "", authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: str
    ) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: OAuthClientInformationFull, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        STATS["refresh_grants"] += 1
        self.refresh.pop(refresh_token.token, None)
        return self._issue(client.client_id or "", scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: AccessToken | RefreshToken) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)


def oauth_app(port: int, issuer_host: str = "127.0.0.1") -> Any:
    base = f"http://127.0.0.1:{port}"
    settings = AuthSettings(
        issuer_url=f"http://{issuer_host}:{port}",  # type: ignore[arg-type]
        resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["tools"]),
        required_scopes=["tools"],
        validate_token_resource=False,
    )
    mcp = FastMCP(
        "auth-oauth", host="127.0.0.1", port=port, auth_server_provider=ApprovingProvider(), auth=settings
    )
    tools(mcp)

    @mcp.custom_route("/stats", methods=["GET"])
    async def stats(request: Request) -> Response:
        return JSONResponse(STATS)

    return mcp.streamable_http_app()


def main(mode: str) -> None:
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    port = sock.getsockname()[1]
    if mode == "static":
        app = static_app(port)
    else:  # "oauth", or "oauth-localhost": its authorization server named by another host name
        app = oauth_app(port, "localhost" if mode == "oauth-localhost" else "127.0.0.1")
    print(f"PORT {port}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


if __name__ == "__main__":
    main(sys.argv[1])
    sys.exit(0)
