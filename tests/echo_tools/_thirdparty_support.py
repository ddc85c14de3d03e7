"""A real third-party API on 127.0.0.1 for the credential and OpenAPI tests: it checks bearer, api-key
(header and query) and basic auth, issues OAuth2 client-credentials tokens (counting them), and has an
OpenAPI 3.1 document of its own (`shop_spec`)."""

from __future__ import annotations

import base64
from typing import Any

from tests.echo_tools._executor_support import ThreadedAiohttpServer

BEARER = "bearer-secret-7f3a9c01"
API_KEY = "apikey-secret-52d1e8"
QUERY_KEY = "querykey-secret-a81b"
BASIC_USER, BASIC_PASSWORD = "ada", "basic-secret-pw-9921"
CLIENT_ID, CLIENT_SECRET = "shop-client", "client-secret-e41b77"
TOKEN_PREFIX = "oauth-token-secret-"
SECRETS = (BEARER, API_KEY, QUERY_KEY, BASIC_PASSWORD, CLIENT_SECRET, TOKEN_PREFIX)

CREDENTIALS = {
    "shop-bearer": {"type": "bearer", "token": BEARER},
    "shop-key": {"type": "api_key", "in": "header", "name": "X-API-Key", "value": API_KEY},
    "shop-query": {"type": "api_key", "in": "query", "name": "api_key", "value": QUERY_KEY},
    "shop-basic": {"type": "basic", "username": BASIC_USER, "password": BASIC_PASSWORD},
}


def oauth_credential(base: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "oauth2_client_credentials",
        "token_url": f"{base}/oauth/token",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "scopes": ["orders:read"],
        **extra,
    }


class ShopService(ThreadedAiohttpServer):
    """An aiohttp server in its own thread and loop; `.token_fetches` counts OAuth2 token requests,
    `.captured` holds what `/capture` received (headers and query), for the redirect test."""

    thread_name = "shop-service"

    def __init__(self, token_lifetime: int = 3600) -> None:
        super().__init__()
        self.token_lifetime = token_lifetime
        self.token_fetches = 0
        self.tokens: set[str] = set()
        self.captured: list[dict[str, Any]] = []
        self.redirect_to = ""

    async def make_app(self) -> Any:
        from aiohttp import web

        def denied(why: str) -> web.Response:
            return web.json_response({"error": why}, status=401)

        def bearer_ok(request: web.Request, allowed: set[str]) -> bool:
            header = request.headers.get("Authorization", "")
            return header.startswith("Bearer ") and header[7:] in allowed

        async def get_item(request: web.Request) -> web.Response:
            if not bearer_ok(request, {BEARER}):
                return denied("bearer token missing or wrong")
            return web.json_response(
                {
                    "id": int(request.match_info["item_id"]),
                    "fields": request.query.get("fields"),
                    "request_id": request.headers.get("X-Request-Id"),
                }
            )

        async def create_order(request: web.Request) -> web.Response:
            if request.headers.get("X-API-Key") != API_KEY:
                return denied("api key missing or wrong")
            body = await request.json()
            return web.json_response({"id": 1001, "status": "created", "order": body}, status=201)

        async def search(request: web.Request) -> web.Response:
            if request.query.get("api_key") != QUERY_KEY:
                return denied("api_key query parameter missing or wrong")
            return web.json_response({"q": request.query.get("q"), "hits": 3})

        async def account(request: web.Request) -> web.Response:
            expected = "Basic " + base64.b64encode(f"{BASIC_USER}:{BASIC_PASSWORD}".encode()).decode()
            if request.headers.get("Authorization") != expected:
                return denied("basic credentials missing or wrong")
            return web.json_response({"user": BASIC_USER})

        async def reports(request: web.Request) -> web.Response:
            if not bearer_ok(request, self.tokens):
                return denied("oauth2 token missing or unknown")
            return web.json_response({"reports": ["q1", "q2"]})

        async def token(request: web.Request) -> web.Response:
            form = await request.post()
            expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
            by_header = request.headers.get("Authorization") == expected
            by_body = form.get("client_id") == CLIENT_ID and form.get("client_secret") == CLIENT_SECRET
            if form.get("grant_type") != "client_credentials" or not (by_header or by_body):
                return web.json_response({"error": "invalid_client"}, status=401)
            self.token_fetches += 1
            value = f"{TOKEN_PREFIX}{self.token_fetches}"
            self.tokens.add(value)
            return web.json_response(
                {"access_token": value, "token_type": "Bearer", "expires_in": self.token_lifetime}
            )

        async def away(request: web.Request) -> web.Response:
            raise web.HTTPFound(self.redirect_to)

        async def capture(request: web.Request) -> web.Response:
            self.captured.append({"headers": dict(request.headers), "query": dict(request.query)})
            return web.json_response({"captured": True})

        async def spec(request: web.Request) -> web.Response:
            return web.json_response(shop_spec(self.base))

        app = web.Application()
        app.router.add_get("/items/{item_id}", get_item)
        app.router.add_post("/orders", create_order)
        app.router.add_get("/search", search)
        app.router.add_get("/account", account)
        app.router.add_get("/reports", reports)
        app.router.add_post("/oauth/token", token)
        app.router.add_get("/away", away)
        app.router.add_get("/capture", capture)
        app.router.add_get("/openapi.json", spec)
        return app


def shop_spec(base: str) -> dict[str, Any]:
    """The shop's OpenAPI 3.1 document."""
    return {
        "openapi": "3.1.0",
        "info": {"title": "Shop", "version": "2.1"},
        "servers": [{"url": base}],
        "components": {
            "schemas": {
                "Order": {
                    "type": "object",
                    "required": ["item_id", "quantity"],
                    "properties": {
                        "id": {"type": "integer", "readOnly": True},
                        "item_id": {"type": "integer", "description": "what to order"},
                        "quantity": {"$ref": "#/components/schemas/Quantity"},
                        "note": {"type": ["string", "null"]},
                    },
                },
                "Quantity": {"type": "integer", "minimum": 1, "maximum": 99},
            },
            "parameters": {
                "RequestId": {"name": "X-Request-Id", "in": "header", "schema": {"type": "string"}}
            },
        },
        "paths": {
            "/items/{item_id}": {
                "parameters": [{"$ref": "#/components/parameters/RequestId"}],
                "get": {
                    "operationId": "getItem",
                    "summary": "Get one item",
                    "parameters": [
                        {"name": "item_id", "in": "path", "required": True, "schema": {"type": "integer"}},
                        {
                            "name": "fields",
                            "in": "query",
                            "explode": False,
                            "schema": {"type": "array", "items": {"type": "string"}},
                        },
                    ],
                    "responses": {"200": {"description": "the item"}},
                },
            },
            "/orders": {
                "post": {
                    "operationId": "createOrder",
                    "summary": "Create an order",
                    "requestBody": {
                        "required": True,
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Order"}}},
                    },
                    "responses": {"201": {"description": "created"}},
                }
            },
            "/search": {
                "get": {
                    "summary": "Search the catalogue",
                    "parameters": [
                        {"name": "q", "in": "query", "required": True, "schema": {"type": "string"}}
                    ],
                    "responses": {"200": {"description": "hits"}},
                }
            },
            "/account": {
                "get": {"operationId": "getAccount", "responses": {"200": {"description": "me"}}},
            },
            "/reports": {
                "get": {
                    "operationId": "listReports",
                    "summary": "List reports",
                    "responses": {"200": {"description": "reports"}},
                }
            },
            "/away": {
                "get": {"operationId": "goAway", "responses": {"302": {"description": "elsewhere"}}},
            },
        },
    }
