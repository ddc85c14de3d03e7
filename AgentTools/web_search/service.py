"""The web_search tool: EchoAI's `WebSearchService.search`, widened from retired Bing to four providers.

`provider` is `auto` (ECHO_WEB_SEARCH_PROVIDER, else the first configured of SearXNG, Brave, Google, else
DuckDuckGo's keyless HTML endpoint), or one of `brave`, `google`, `searxng`, `duckduckgo`. EchoAI's
`bing` is accepted and answered by the configured provider, with a note saying so.
"""

from __future__ import annotations

from typing import Any

from AgentTools._http import close_shared_client
from AgentTools.web_search.providers import SearchRequest, choose


class WebSearchService:
    """Web search over the configured provider."""

    async def search(
        self,
        query: str,
        provider: str = "auto",
        max_results: int = 10,
        safe_search: bool = True,
        language: str = "en",
        **_ignored: Any,
    ) -> dict[str, Any]:
        """Search and return `{query, provider, results: [{title, url, snippet, position}], total_results}`.

        Raises:
            ValueError: an empty query, an unknown provider, max_results outside 1-50.
            ToolConfigError: the chosen provider is not configured (names the environment variables).
            ToolExecutionError: the provider could not be reached or refused the request.
        """
        query = query.strip()
        if not query:
            raise ValueError("query is empty; give the words to search for")
        if len(query) > 500:
            raise ValueError(f"query is {len(query)} characters long; at most 500 are allowed")
        if not 1 <= max_results <= 50:
            raise ValueError(f"max_results must be between 1 and 50, got {max_results!r}")
        chosen, note = choose(provider.strip().lower())
        chosen.require_configured()
        request = SearchRequest(query, max_results, safe_search, (language or "en").split("-")[0].lower())
        results, total = await chosen.search(request)
        out: dict[str, Any] = {
            "query": query,
            "provider": chosen.name,
            "results": results,
            "total_results": len(results),
        }
        if total is not None:
            out["estimated_total"] = total
        if note:
            out["note"] = note
        return out

    async def aclose(self) -> None:
        """Close the shared HTTP client of the running loop."""
        await close_shared_client()
