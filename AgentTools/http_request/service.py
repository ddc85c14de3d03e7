"""The http_request tool: the canvas "API" node's call, through an egress policy.

Every URL, including each redirect hop, is checked before it is contacted: loopback, private, link-local
(cloud metadata) and reserved addresses are refused unless the server's environment allows them
(`ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK=1`, `ECHO_TOOLS_EGRESS_ALLOW_PRIVATE=1`,
`ECHO_TOOLS_EGRESS_ALLOWED_HOSTS=host1,10.0.0.0/8`). Host names are resolved once, every address checked,
and the connection made to an address that was checked (`echo_tools.egress.egress_client`), so a DNS
answer that changes between the check and the connection (rebinding) reaches nothing new. Responses are
read up to `max_response_bytes` of decoded body (any Content-Encoding, decoded in bounded steps), then cut
with `truncated: true`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin

import httpx

from AgentTools._http import egress_policy, shared_client
from echo_tools.bounded_body import UndecodableBodyError
from echo_tools.bounded_read import content_encoding_of, read_bounded
from echo_tools.errors import ToolExecutionError

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
MAX_RESPONSE_BYTES = 10 * 1024 * 1024
MAX_REDIRECTS = 5
_HOP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})
_CREDENTIALS = frozenset({"authorization", "cookie", "proxy-authorization", "x-api-key"})


def _body_args(body: Any, headers: dict[str, str]) -> dict[str, Any]:
    if body is None:
        return {}
    if isinstance(body, (dict, list)):
        return {"json": body}
    if isinstance(body, (int, float, bool)):
        return {"json": body}
    return {"content": str(body).encode("utf-8")}


def _checked_headers(headers: dict[str, Any] | None) -> dict[str, str]:
    sent = {}
    for name, value in (headers or {}).items():
        if not isinstance(value, str) or "\n" in value or "\r" in value:
            raise ValueError(f"headers[{name!r}] must be a single-line string, got {value!r:.60}")
        if name.lower() not in _HOP_HEADERS:
            sent[name] = value
    return sent


def _check_limits(method: str, timeout_seconds: float, max_response_bytes: int) -> None:
    if method not in METHODS:
        raise ValueError(f"method {method!r} is not supported; expected one of {', '.join(METHODS)}")
    if not 0 < timeout_seconds <= 120:
        raise ValueError(f"timeout_seconds must be in (0, 120], got {timeout_seconds!r}")
    if not 1 <= max_response_bytes <= MAX_RESPONSE_BYTES:
        raise ValueError(
            f"max_response_bytes must be between 1 and {MAX_RESPONSE_BYTES}, got {max_response_bytes!r}"
        )


@dataclass
class _Call:
    """One request as it moves through redirects."""

    method: str
    url: str
    headers: dict[str, str]
    query: dict[str, Any] | None
    body: Any
    timeout: float
    hops: list[str] = field(default_factory=list)

    async def send(self) -> httpx.Response:
        """Send the current URL through the egress client, which checks the address it connects to (the
        response is streamed)."""
        client = shared_client(egress_policy())
        try:
            request = client.build_request(
                self.method, self.url, headers=self.headers, params=None if self.hops else self.query,
                timeout=self.timeout, **_body_args(self.body, self.headers),
            )  # fmt: skip
            return await client.send(request, stream=True)
        except httpx.InvalidURL as exc:
            raise ValueError(f"url {self.url!r} is not a valid URL: {exc}") from exc
        except httpx.TimeoutException as exc:
            raise ToolExecutionError(
                f"{self.method} {self.url!r} timed out after {self.timeout:g} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise ToolExecutionError(f"{self.method} {self.url!r} failed: {exc!r}") from exc

    def redirect(self, response: httpx.Response, location: str) -> None:
        """Move to the redirect target: credentials stay with their host, 303 (and POST 301/302) become GET."""
        self.hops.append(self.url)
        target = urljoin(str(response.url), location)
        if httpx.URL(target).host != httpx.URL(self.url).host:
            self.headers = {k: v for k, v in self.headers.items() if k.lower() not in _CREDENTIALS}
        self.url = target
        if response.status_code == 303 or (response.status_code in (301, 302) and self.method == "POST"):
            self.method, self.body = "GET", None


def _result(
    response: httpx.Response, data: bytes, truncated: bool, max_bytes: int, call: _Call, started: float
) -> dict[str, Any]:
    text = data.decode(response.encoding or "utf-8", errors="replace")
    out: dict[str, Any] = {
        "status_code": response.status_code,
        "ok": response.is_success,
        "url": str(response.url),
        "headers": dict(response.headers),
        "body": text,
        "truncated": truncated,
        "elapsed_ms": round((time.perf_counter() - started) * 1000, 2),
    }
    if truncated:
        encoding = content_encoding_of(response)
        decoded = f" of Content-Encoding {encoding!r}" if encoding else ""
        out["note"] = f"the body{decoded} was cut at max_response_bytes ({max_bytes} bytes, decoded)"
    if call.hops:
        out["redirects"] = call.hops
    if "json" in response.headers.get("content-type", "") and not truncated and text.strip():
        try:
            out["json"] = json.loads(text)
        except ValueError:
            pass  # a server that labels non-JSON as JSON: the text is still returned
    return out


class HttpRequestService:
    """Outbound HTTP for agents, limited by the egress policy."""

    async def request(
        self,
        url: str,
        method: str = "GET",
        headers: dict[str, str] | None = None,
        query: dict[str, Any] | None = None,
        body: Any = None,
        timeout_seconds: float = 30.0,
        follow_redirects: bool = True,
        max_response_bytes: int = 1_000_000,
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Send the request and return status_code, headers, body (text), json (when JSON) and timing.

        Raises:
            EgressDeniedError: the URL or a redirect target is refused by the egress policy.
            ValueError: a bad method, header or limit.
            ToolExecutionError: the server could not be reached or the request timed out.
        """
        _check_limits(method.upper(), timeout_seconds, max_response_bytes)
        call = _Call(method.upper(), url, _checked_headers(headers), query, body, timeout_seconds)
        started = time.perf_counter()
        for _ in range(MAX_REDIRECTS + 1):
            response = await call.send()
            try:
                location = response.headers.get("location")
                if follow_redirects and response.is_redirect and location:
                    call.redirect(response, location)
                    continue
                try:
                    data, truncated = await read_bounded(response, max_response_bytes)
                except UndecodableBodyError as exc:
                    raise ToolExecutionError(f"{call.method} {call.url!r}: {exc}") from exc
                return _result(response, data, truncated, max_response_bytes, call, started)
            finally:
                await response.aclose()
        raise ToolExecutionError(f"{url!r} redirected more than {MAX_REDIRECTS} times")
