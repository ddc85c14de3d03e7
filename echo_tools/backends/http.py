"""The `api` backend: a tool that is one HTTP request, `{url, method, headers, query, body, timeout}`.

`{param}` placeholders in the URL are filled from the input (URL-quoted) and removed from it; the rest of
the input is the JSON body, or the query string for GET, DELETE and HEAD. `${NAME}` in header values is
read from the environment at call time and never stored resolved. Every URL, and every redirect hop, is
checked against the executor's egress policy on the address it connects to; redirects are followed by
hand (at most 5). Responses are streamed and decoded under `egress.max_response_bytes` (`bounded_body`): a
larger body, compressed or not, fails the call.

Transport: one egress client (`echo_tools.egress.egress_client`) per executor and event loop (httpx
clients are bound to the loop they first ran on): httpx's API on aiohttp's connection pool, which stays
fast under concurrency where httpcore's pool does not (encode/httpx#3215), every connection pinned to
addresses the policy allowed.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin, urlsplit

from echo_tools.backends.base import BackendHost, BackendOutput, ToolBackend, config_error
from echo_tools.bounded_body import UndecodableBodyError
from echo_tools.bounded_read import content_encoding_of, read_bounded
from echo_tools.credentials import credential_for
from echo_tools.egress import check_tool_headers
from echo_tools.env_refs import ENV_REFERENCE, expand
from echo_tools.errors import EgressDeniedError, ToolConfigError, ToolExecutionError, ToolValidationError
from echo_tools.redaction import hide_secret_values, is_secret_key, redact
from echo_tools.runtime import PerLoop

if TYPE_CHECKING:
    from collections.abc import Sequence

    import httpx

    from echo_tools.egress import EgressPolicy
    from echo_tools.models import ToolContext, ToolDef

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
QUERY_METHODS = frozenset({"GET", "DELETE", "HEAD"})
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
ERROR_BODY_CHARS = 500
DEFAULT_TIMEOUT_S = 30.0
_CACHE_SIZE = 1024


def make_client(policy: EgressPolicy) -> httpx.AsyncClient:
    """The egress client of `policy` (pinned connections, bounded bodies, no proxy from the environment)."""
    from echo_tools.egress import egress_client

    return egress_client(policy, max_connections=200, timeout=DEFAULT_TIMEOUT_S)


def resolve_headers(tool: ToolDef, headers: dict[str, Any]) -> dict[str, str]:
    """Header values with `${NAME}` replaced from the environment, read now (never stored).

    Raises:
        ToolConfigError: a referenced variable is not set (the header and variable are named); retrying
            would not help, so it is reported as a failed call without retries.
    """

    def missing(name: str, var: str) -> ToolConfigError:
        return ToolConfigError(
            f"Tool {tool.tool_id!r}: header {name!r} needs environment variable {var!r}, which is not set",
            tool_id=tool.tool_id,
            field=f"execution_config.headers.{name}",
        )

    return expand(headers, missing)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


def _carries_secret(name: str, configured: Any) -> bool:
    return is_secret_key(name) or (isinstance(configured, str) and bool(ENV_REFERENCE.search(configured)))


def build_request(tool: ToolDef, args: dict[str, Any]) -> tuple[str, str, dict[str, Any], Any]:
    """`(method, url, query, json_body)` for one call: placeholders filled, the rest as body or query."""
    config = tool.execution_config
    method = str(config.get("method", "POST")).upper()
    template = str(config["url"])
    names = PLACEHOLDER.findall(template)
    for name in names:
        if args.get(name) is None:
            raise ToolValidationError(
                f"Tool {tool.tool_id!r}: input.{name} is required to fill the URL placeholder {{{name}}}",
                tool_id=tool.tool_id,
                field=f"input.{name}",
            )
    for name in names:
        if str(args[name]) in (".", ".."):
            # a dot segment would climb the URL path to another endpoint of the same API
            raise ToolValidationError(
                f"Tool {tool.tool_id!r}: input.{name} {args[name]!r} cannot fill a URL path segment "
                "('.' and '..' would move to another path)",
                tool_id=tool.tool_id,
                field=f"input.{name}",
            )
    url = PLACEHOLDER.sub(lambda m: quote(str(args[m.group(1)]), safe=""), template)
    rest = {k: v for k, v in args.items() if k not in names}
    query: dict[str, Any] = dict(config.get("query") or {})
    body: Any = None
    if method in QUERY_METHODS:
        for key, value in rest.items():
            if value is None:
                continue
            query[key] = json.dumps(value) if isinstance(value, (dict, list)) else value
    else:
        fixed = config.get("body")
        if isinstance(fixed, dict):
            body = {**fixed, **rest}
        elif fixed is not None and not rest:
            body = fixed
        else:
            body = rest
    return method, url, query, body


HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "TRACE")


class HttpBackend(ToolBackend):
    """Runs `api` tools through the executor's shared HTTP clients (one per event loop)."""

    @classmethod
    def check_config(
        cls, tool: ToolDef, allowed_modules: Sequence[str], egress: EgressPolicy | None = None
    ) -> None:
        config = tool.execution_config
        url = config.get("url")
        if not isinstance(url, str) or not url:
            raise config_error(
                tool, "execution_config.url", f"execution_config.url must be an http(s) URL, got {url!r}"
            )
        parts = urlsplit(url.replace("{", "").replace("}", ""))
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise config_error(
                tool, "execution_config.url", f"execution_config.url must be an http(s) URL, got {url!r}"
            )
        if "{" in parts.netloc or "{" in urlsplit(url).netloc:
            raise config_error(
                tool, "execution_config.url", f"execution_config.url may not template the host: {url!r}"
            )
        method = str(config.get("method", "POST")).upper()
        if method not in HTTP_METHODS:
            raise config_error(
                tool,
                "execution_config.method",
                f"execution_config.method {method!r} is not one of {HTTP_METHODS}",
            )
        for key in ("headers", "query"):
            value = config.get(key, {})
            if not isinstance(value, dict) or not all(
                isinstance(v, (str, int, float)) for v in value.values()
            ):
                raise config_error(
                    tool, f"execution_config.{key}", f"execution_config.{key} must map names to strings"
                )
        check_tool_headers(
            tool
        )  # no Host, Content-Length, Transfer-Encoding, Connection or hop-by-hop header
        timeout = config.get("timeout")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout <= 0):
            raise config_error(
                tool,
                "execution_config.timeout",
                f"execution_config.timeout must be positive, got {timeout!r}",
            )
        if egress is not None:
            try:
                egress.check_url(url)
            except EgressDeniedError as exc:
                raise config_error(tool, "execution_config.url", str(exc)) from exc

    def __init__(self, executor: BackendHost) -> None:
        self.executor = executor
        # one client per running loop (a client is bound to its loop) and egress policy
        self._clients: PerLoop[EgressPolicy, httpx.AsyncClient] = PerLoop()
        self._parsed: dict[str, httpx.URL] = {}

    def client(self) -> httpx.AsyncClient:
        """The shared client of the running event loop and the executor's policy (created on first use)."""
        policy = self.executor.egress
        return self._clients.get(policy, lambda: make_client(policy))

    async def call(self, tool: ToolDef, args: dict[str, Any], context: ToolContext) -> BackendOutput:
        import httpx  # not at module load: registering an `api` tool checks its config without httpx

        config = tool.execution_config
        if "arguments" in config:  # imported tools say where each argument goes (echo_tools.openapi.request)
            from echo_tools.openapi.request import build_mapped_request

            method, url, query, body, extra = build_mapped_request(tool, args)
        else:
            (method, url, query, body), extra = build_request(tool, args), {}
        headers = {**resolve_headers(tool, config.get("headers") or {}), **extra}
        _refuse_framing_headers(tool, headers)  # refused at registration too; this catches older definitions
        timeout = float(config.get("timeout") or DEFAULT_TIMEOUT_S)
        client = self.client()
        # a named credential (echo_tools.credentials), sent to the tool's own origin only, never on redirects
        auth = (
            await credential_for(self.executor, tool, url, client, context.user_id)
            if "credential" in config
            else None
        )  # the end user's own credential first (`credentials.per_user`)
        origin = _origin(url)
        # headers that carry a secret (a `${VAR}` or a secret-looking name) go to the tool's own origin only
        public = {
            k: v for k, v in headers.items() if not _carries_secret(k, (config.get("headers") or {}).get(k))
        }
        for _ in range(MAX_REDIRECTS + 1):
            send_json = body if method not in QUERY_METHODS else None
            # a form body, already encoded (`echo_tools.openapi.request.EncodedBody`)
            encoded = send_json if hasattr(send_json, "content_type") else None
            own = headers if _origin(url) == origin else public
            hop_headers, hop_query = auth.add_to(url, own, query) if auth else (own, query)
            try:
                request = client.build_request(
                    method,
                    self._url(url),
                    params=hop_query or None,
                    json=send_json if encoded is None else None,
                    content=encoded.content if encoded is not None else None,
                    headers=hop_headers,
                    timeout=timeout,
                )
                response = await client.send(request, stream=True)
            except httpx.TimeoutException as exc:
                raise ToolExecutionError(
                    f"Tool {tool.tool_id!r}: {method} {_shown(url)} timed out after {timeout:g} s",
                    tool_id=tool.tool_id,
                ) from exc
            except httpx.HTTPError as exc:
                raise ToolExecutionError(
                    f"Tool {tool.tool_id!r}: {method} {_shown(url)} failed: {type(exc).__name__}: {exc}",
                    tool_id=tool.tool_id,
                ) from exc
            try:
                # one pass over the raw headers: httpx's Headers re-decodes every header on each lookup
                meta = {k.lower(): v for k, v in response.headers.raw}
                location = meta.get(b"location")
                if response.status_code in REDIRECTS and location:
                    url = urljoin(str(response.request.url), location.decode("latin-1"))
                    query = {}  # the Location carries its own query
                    if response.status_code == 303 or (
                        response.status_code in (301, 302) and method != "HEAD"
                    ):
                        method, body = ("GET" if method != "HEAD" else "HEAD"), None
                    continue
                content = await self._read_capped(tool, response, meta.get(b"content-length"))
            finally:
                await response.aclose()
            content_type = meta.get(b"content-type", b"").decode("latin-1")
            output = _decode(tool, method, url, response.status_code, content_type, content)
            if auth is not None:  # a service may echo the credential back, under any key: hide its value
                output = redact(output)
            return BackendOutput(output, {"status": response.status_code})
        raise ToolExecutionError(
            f"Tool {tool.tool_id!r}: more than {MAX_REDIRECTS} redirects starting from {_shown(str(config['url']))}",
            tool_id=tool.tool_id,
        )

    def _url(self, url: str) -> httpx.URL:
        # parsing a URL is a good part of httpx's per-request cost; tools call the same few URLs again
        found = self._parsed.get(url)
        if found is None:
            import httpx  # not at module load: registering an `api` tool checks its config without httpx

            found = httpx.URL(url)
            if len(self._parsed) < _CACHE_SIZE:
                self._parsed[url] = found
        return found

    async def _read_capped(self, tool: ToolDef, response: httpx.Response, declared: bytes | None) -> bytes:
        """The decoded body, refused once it (or its raw bytes) passes `max_response_bytes`."""
        limit = self.executor.egress.max_response_bytes
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r}: the response of {int(declared)} bytes exceeds the limit of {limit} bytes",
                tool_id=tool.tool_id,
            )
        try:
            content, cut = await read_bounded(response, limit)
        except UndecodableBodyError as exc:
            raise ToolExecutionError(f"Tool {tool.tool_id!r}: {exc}", tool_id=tool.tool_id) from exc
        if cut:
            encoding = content_encoding_of(response)
            decoded = f" (decoded from Content-Encoding {encoding!r})" if encoding else ""
            raise ToolExecutionError(
                f"Tool {tool.tool_id!r}: the response{decoded} exceeds the limit of {limit} bytes "
                "(max_response_bytes); reading stopped",
                tool_id=tool.tool_id,
            )
        return content

    async def aclose(self) -> None:
        """Close every client: this loop's directly, a client of another live loop on that loop."""
        current = asyncio.get_running_loop()
        for loop, client in self._clients.drain():
            if loop is current:
                await client.aclose()
            elif loop.is_running() and not loop.is_closed():
                await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(client.aclose(), loop))
            # a client of a closed loop cannot be closed any more; its sockets went with the loop


def _refuse_framing_headers(tool: ToolDef, headers: dict[str, Any]) -> None:
    from echo_tools.egress import framing_header_refusal

    for name in headers:
        refusal = framing_header_refusal(name)
        if refusal:
            raise ToolConfigError(
                f"Tool {tool.tool_id!r}: {refusal}",
                tool_id=tool.tool_id,
                field=f"execution_config.arguments.{name}",
            )


def _decode(tool: ToolDef, method: str, url: str, status: int, content_type: str, content: bytes) -> Any:
    """The output of a response: parsed JSON, else text; a non-2xx status is a failure."""
    if not 200 <= status < 300:
        text = content[: ERROR_BODY_CHARS * 4].decode(_charset(content_type), errors="replace")
        text = hide_secret_values(text)  # an error page may quote the request's credential
        raise ToolExecutionError(
            f"Tool {tool.tool_id!r}: {method} {_shown(url)} returned HTTP {status}: {text[:ERROR_BODY_CHARS]}",
            tool_id=tool.tool_id,
        )
    if not content:
        return None
    if "json" in content_type:
        try:
            return json.loads(content)
        except ValueError:
            pass  # declared JSON but is not: the text is more useful than an error
    return content.decode(_charset(content_type), errors="replace")


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        name, _, value = part.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"')
            try:
                return codecs.lookup(charset).name
            except LookupError:
                break
    return "utf-8"


def _shown(url: str) -> str:
    """The URL without its query string, which may carry keys."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}{parts.path}"
