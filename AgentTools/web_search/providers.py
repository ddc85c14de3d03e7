"""Search providers: Brave Search API, Google Programmable Search, SearXNG (JSON API), DuckDuckGo HTML.

Every base URL and key comes from the server's environment, never from tool input, so tests and offline
demos point a provider at a local server (`BRAVE_BASE_URL`, `GOOGLE_BASE_URL`, `ECHO_SEARXNG_URL`,
`DDG_BASE_URL`). All providers share the egress client of the running loop (`AgentTools._http`); the
configured provider's host is allowed by name (the operator chose it), everything else follows the
server's egress policy.
"""

from __future__ import annotations

import dataclasses
import html
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from AgentTools._http import egress_policy, shared_client
from echo_tools.bounded_body import UndecodableBodyError
from echo_tools.bounded_read import content_encoding_of, read_bounded
from echo_tools.errors import ToolConfigError, ToolExecutionError

MAX_RESPONSE_BYTES = 5 * 1024 * 1024
_DECODED_AWAY = frozenset({"content-encoding", "content-length", "transfer-encoding"})


@dataclass
class SearchRequest:
    """One search, provider-neutral."""

    query: str
    max_results: int = 10
    safe_search: bool = True
    language: str = "en"


def result(title: str, url: str, snippet: str, position: int, **extra: Any) -> dict[str, Any]:
    """One result in the tool's output shape."""
    return {
        "title": html.unescape(title or "").strip(),
        "url": url,
        "snippet": html.unescape(snippet or "").strip(),
        "position": position,
        **extra,
    }


class SearchProvider(ABC):
    """A search backend. `configured()` says whether the environment has what it needs."""

    name = ""
    env_help = ""

    @abstractmethod
    def configured(self) -> bool:
        """True when the environment holds this provider's settings."""

    @abstractmethod
    async def search(self, request: SearchRequest) -> tuple[list[dict[str, Any]], int | None]:
        """Run the search; returns the results and, when the provider reports it, the total hit count."""

    def require_configured(self) -> None:
        if not self.configured():
            raise ToolConfigError(
                f"Search provider {self.name!r} is not configured: {self.env_help}", field="provider"
            )

    async def get(self, url: str, **kwargs: Any) -> httpx.Response:
        """GET through the shared client; HTTP and network failures become readable `ToolExecutionError`s.

        The body is decoded under `MAX_RESPONSE_BYTES` (any Content-Encoding); a larger one fails the call.
        """
        base = egress_policy()
        host = urlsplit(url).hostname or ""
        client = shared_client(dataclasses.replace(base, allowed_hosts=(*base.allowed_hosts, host)))
        try:
            async with client.stream("GET", url, **kwargs) as streamed:
                body, cut = await read_bounded(streamed, MAX_RESPONSE_BYTES)
        except httpx.HTTPError as exc:
            raise ToolExecutionError(
                f"Search provider {self.name!r} could not be reached at {url!r}: {exc!r}"
            ) from exc
        except UndecodableBodyError as exc:
            raise ToolExecutionError(f"Search provider {self.name!r}: {exc}") from exc
        if cut:
            raise ToolExecutionError(
                f"Search provider {self.name!r} answered more than {MAX_RESPONSE_BYTES} bytes "
                f"(decoded, Content-Encoding {content_encoding_of(streamed) or 'identity'!r}); "
                "reading stopped"
            )
        headers = {k: v for k, v in streamed.headers.items() if k.lower() not in _DECODED_AWAY}
        response = httpx.Response(
            streamed.status_code, headers=headers, content=body, request=streamed.request
        )
        if response.status_code in (401, 403):
            raise ToolExecutionError(
                f"Search provider {self.name!r} refused the request (HTTP {response.status_code}); check its key: {self.env_help}"
            )
        if response.status_code == 429:
            raise ToolExecutionError(
                f"Search provider {self.name!r} is rate limiting (HTTP 429); try again later"
            )
        if response.status_code >= 400:
            raise ToolExecutionError(
                f"Search provider {self.name!r} answered HTTP {response.status_code}: {response.text[:200]!r}"
            )
        return response

    def json_of(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise ToolExecutionError(
                f"Search provider {self.name!r} did not answer JSON: {response.text[:120]!r}"
            ) from exc


class BraveProvider(SearchProvider):
    """Brave Search API: `GET /res/v1/web/search` with the `X-Subscription-Token` header (count up to 20)."""

    name = "brave"
    env_help = "set BRAVE_API_KEY (and BRAVE_BASE_URL to use another endpoint)"

    def configured(self) -> bool:
        return bool(os.environ.get("BRAVE_API_KEY"))

    async def search(self, request: SearchRequest) -> tuple[list[dict[str, Any]], int | None]:
        base = os.environ.get("BRAVE_BASE_URL", "https://api.search.brave.com").rstrip("/")
        out: list[dict[str, Any]] = []
        offset = 0
        while len(out) < request.max_results and offset <= 9:
            params = {
                "q": request.query,
                "count": min(20, request.max_results - len(out)),
                "offset": offset,
                "safesearch": "strict" if request.safe_search else "off",
                "search_lang": request.language,
            }
            headers = {"X-Subscription-Token": os.environ["BRAVE_API_KEY"], "Accept": "application/json"}
            data = self.json_of(await self.get(f"{base}/res/v1/web/search", params=params, headers=headers))
            items = ((data or {}).get("web") or {}).get("results") or []
            for item in items:
                out.append(
                    result(
                        item.get("title", ""), item.get("url", ""), item.get("description", ""), len(out) + 1
                    )
                )
            more = ((data or {}).get("query") or {}).get("more_results_available", False)
            if not items or not more:
                break
            offset += 1
        return out[: request.max_results], None


class GoogleProvider(SearchProvider):
    """Google Programmable Search (Custom Search JSON API): `GET /customsearch/v1` with `key`, `cx`."""

    name = "google"
    env_help = "set GOOGLE_CSE_KEY and GOOGLE_CSE_CX (and GOOGLE_BASE_URL to use another endpoint)"

    def configured(self) -> bool:
        return bool(os.environ.get("GOOGLE_CSE_KEY") and os.environ.get("GOOGLE_CSE_CX"))

    async def search(self, request: SearchRequest) -> tuple[list[dict[str, Any]], int | None]:
        base = os.environ.get("GOOGLE_BASE_URL", "https://www.googleapis.com").rstrip("/")
        out: list[dict[str, Any]] = []
        total: int | None = None
        start = 1
        while len(out) < request.max_results and start <= 91:  # the API serves the first 100 results
            page_size = min(10, request.max_results - len(out))
            params: dict[str, str | int] = {
                "key": os.environ["GOOGLE_CSE_KEY"],
                "cx": os.environ["GOOGLE_CSE_CX"],
                "q": request.query,
                "num": page_size,
                "start": start,
                "safe": "active" if request.safe_search else "off",
                "lr": f"lang_{request.language}",
                "hl": request.language,
            }
            data = self.json_of(await self.get(f"{base}/customsearch/v1", params=params)) or {}
            info = data.get("searchInformation") or {}
            if str(info.get("totalResults", "")).isdigit():
                total = int(info["totalResults"])
            items = data.get("items") or []
            for item in items:
                out.append(
                    result(item.get("title", ""), item.get("link", ""), item.get("snippet", ""), len(out) + 1)
                )
            if len(items) < page_size:
                break
            start += len(items)
        return out[: request.max_results], total


class SearxngProvider(SearchProvider):
    """A SearXNG instance's JSON API: `GET /search?format=json` (the instance must enable the json format)."""

    name = "searxng"
    env_help = "set ECHO_SEARXNG_URL to the instance's base URL (its settings must allow format=json)"

    def configured(self) -> bool:
        return bool(os.environ.get("ECHO_SEARXNG_URL"))

    async def search(self, request: SearchRequest) -> tuple[list[dict[str, Any]], int | None]:
        base = os.environ["ECHO_SEARXNG_URL"].rstrip("/")
        out: list[dict[str, Any]] = []
        total: int | None = None
        seen: set[str] = set()
        for page in range(1, 6):
            params = {
                "q": request.query,
                "format": "json",
                "pageno": page,
                "language": request.language,
                "safesearch": 2 if request.safe_search else 0,
            }
            data = self.json_of(await self.get(f"{base}/search", params=params)) or {}
            if isinstance(data.get("number_of_results"), int) and data["number_of_results"] > 0:
                total = data["number_of_results"]
            items = [i for i in data.get("results") or [] if i.get("url") not in seen]
            for item in items:
                seen.add(item.get("url", ""))
                extra = {"source": item["engine"]} if item.get("engine") else {}
                out.append(
                    result(
                        item.get("title", ""),
                        item.get("url", ""),
                        item.get("content", ""),
                        len(out) + 1,
                        **extra,
                    )
                )
            if not items or len(out) >= request.max_results or (total is not None and len(out) >= total):
                break
        return out[: request.max_results], total


class _DuckDuckGoParser(HTMLParser):
    """Collects (title, href, snippet) from DuckDuckGo's HTML results page (`result__a`, `result__snippet`)."""

    def __init__(self) -> None:
        super().__init__()
        self.results: list[dict[str, str]] = []
        self._field: str | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if self._field:
            self._depth += 1
            return
        if tag == "a" and "result__a" in classes:
            self.results.append({"title": "", "url": dict(attrs).get("href") or "", "snippet": ""})
            self._field, self._depth = "title", 0
        elif "result__snippet" in classes and self.results:
            self._field, self._depth = "snippet", 0

    def handle_endtag(self, tag: str) -> None:
        if self._field:
            if self._depth == 0:
                self._field = None
            else:
                self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._field and self.results:
            self.results[-1][self._field] += data


def unwrap_ddg_link(href: str) -> str:
    """DuckDuckGo wraps result links as `//duckduckgo.com/l/?uddg=<target>`; return the target."""
    parts = urlsplit(href if "://" in href else "https:" + href if href.startswith("//") else href)
    if parts.path.startswith("/l/"):
        target = parse_qs(parts.query).get("uddg")
        if target:
            return target[0]
    return href


class DuckDuckGoProvider(SearchProvider):
    """DuckDuckGo's keyless HTML endpoint (`/html/?q=`), parsed with the standard library."""

    name = "duckduckgo"
    env_help = "needs no key; DDG_BASE_URL overrides https://html.duckduckgo.com"

    def configured(self) -> bool:
        return True

    async def search(self, request: SearchRequest) -> tuple[list[dict[str, Any]], int | None]:
        base = os.environ.get("DDG_BASE_URL", "https://html.duckduckgo.com").rstrip("/")
        region = "us-en" if request.language == "en" else f"{request.language}-{request.language}"
        params = {"q": request.query, "kl": region, "kp": "1" if request.safe_search else "-2"}
        response = await self.get(f"{base}/html/", params=params)
        parser = _DuckDuckGoParser()
        parser.feed(response.text)
        out: list[dict[str, Any]] = []
        for item in parser.results:
            url = unwrap_ddg_link(item["url"])
            if not url or "duckduckgo.com/y.js" in url:  # ads
                continue
            out.append(result(item["title"], url, item["snippet"], len(out) + 1))
        return out[: request.max_results], None


PROVIDERS: dict[str, SearchProvider] = {
    p.name: p for p in (BraveProvider(), GoogleProvider(), SearxngProvider(), DuckDuckGoProvider())
}


def choose(provider: str) -> tuple[SearchProvider, str | None]:
    """The provider to use for `provider` (`auto`, `bing` or a name), and a note when it was substituted."""
    note = None
    if provider == "bing":
        note = "Bing Web Search API was retired by Microsoft in August 2025; the configured provider answered instead"
        provider = "auto"
    if provider == "auto":
        preferred = os.environ.get("ECHO_WEB_SEARCH_PROVIDER", "").strip().lower()
        if preferred:
            if preferred not in PROVIDERS:
                raise ToolConfigError(
                    f"ECHO_WEB_SEARCH_PROVIDER is {preferred!r}; expected one of {sorted(PROVIDERS)!r}",
                    field="provider",
                )
            return PROVIDERS[preferred], note
        for name in ("searxng", "brave", "google"):
            if PROVIDERS[name].configured():
                return PROVIDERS[name], note
        return PROVIDERS["duckduckgo"], note
    if provider not in PROVIDERS:
        raise ValueError(f"provider {provider!r} is unknown; expected one of: auto, {', '.join(PROVIDERS)}")
    return PROVIDERS[provider], note
