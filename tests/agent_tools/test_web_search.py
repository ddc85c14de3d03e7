"""web_search against real HTTP servers on 127.0.0.1 that answer in each provider's documented shape."""

from __future__ import annotations

import pytest

from AgentTools.web_search.local_server import running_local_search, searxng_response
from AgentTools.web_search.providers import unwrap_ddg_link
from AgentTools.web_search.service import WebSearchService
from echo_tools.errors import ToolConfigError, ToolExecutionError
from tests.agent_tools._http_support import Reply, recording_server
from tests.agent_tools._support import invoke

PROVIDER_ENV = [
    "ECHO_WEB_SEARCH_PROVIDER", "ECHO_SEARXNG_URL", "BRAVE_API_KEY", "BRAVE_BASE_URL",
    "GOOGLE_CSE_KEY", "GOOGLE_CSE_CX", "GOOGLE_BASE_URL", "DDG_BASE_URL",
]  # fmt: skip

# Brave Search API, GET /res/v1/web/search (https://api.search.brave.com/app/documentation/web-search)
BRAVE_BODY = {
    "type": "search",
    "query": {"original": "solar power", "more_results_available": False},
    "web": {
        "type": "search",
        "results": [
            {"title": "Solar power - Wikipedia", "url": "https://en.wikipedia.org/wiki/Solar_power",
             "description": "Solar power is the conversion of energy from <strong>sunlight</strong> into electricity.",
             "age": "2 days ago", "language": "en", "family_friendly": True},
            {"title": "How solar panels work &amp; more", "url": "https://example.com/solar",
             "description": "Photovoltaic cells explained.", "language": "en"},
        ],
    },
}  # fmt: skip

# Google Custom Search JSON API, GET /customsearch/v1
GOOGLE_BODY = {
    "kind": "customsearch#search",
    "searchInformation": {"searchTime": 0.31, "formattedTotalResults": "1,230", "totalResults": "1230"},
    "items": [
        {"kind": "customsearch#result", "title": "Wind power", "link": "https://example.org/wind",
         "displayLink": "example.org", "snippet": "Wind turbines convert kinetic energy."},
    ],
}  # fmt: skip

# DuckDuckGo HTML endpoint, GET /html/?q=
DDG_HTML = """<html><body><div class="results">
<div class="result results_links results_links_deep web-result">
  <h2 class="result__title"><a rel="nofollow" class="result__a"
     href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fheat%2Dpumps&amp;rut=abc">Heat <b>pumps</b> explained</a></h2>
  <a class="result__snippet" href="//duckduckgo.com/l/?uddg=x">A heat pump moves <b>heat</b> &amp; saves energy.</a>
</div>
<div class="result result--ad"><h2><a class="result__a" href="https://duckduckgo.com/y.js?ad_provider=x">Ad</a></h2></div>
<div class="result"><h2 class="result__title"><a class="result__a" href="https://direct.example/page">Direct link</a></h2>
  <div class="result__snippet">Plain snippet</div></div>
</div></body></html>"""


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def provider_server():
    routes = {
        "/res/v1/web/search": lambda seen: Reply(body=BRAVE_BODY),
        "/customsearch/v1": lambda seen: Reply(body=GOOGLE_BODY),
        "/html/": lambda seen: Reply(body=DDG_HTML, content_type="text/html; charset=utf-8"),
        "/search": lambda seen: Reply(
            body=searxng_response(
                [
                    {
                        "title": "Grid batteries",
                        "url": "https://e.org/b",
                        "content": "Batteries store solar energy.",
                    }
                ],
                seen.params["q"],
                1,
            )
        ),
        "/denied/res/v1/web/search": lambda seen: Reply(401, {"error": "bad token"}),
    }
    with recording_server(routes) as server:
        yield server


async def test_brave_sends_its_token_and_parameters_and_maps_results(provider_server, monkeypatch):
    monkeypatch.setenv("BRAVE_API_KEY", "brave-test-key")
    monkeypatch.setenv("BRAVE_BASE_URL", provider_server.url)
    service = WebSearchService()
    out = await service.search(
        "solar power", provider="brave", max_results=5, safe_search=False, language="fr"
    )
    await service.aclose()
    seen = provider_server.seen[-1]
    assert seen.headers["x-subscription-token"] == "brave-test-key"
    assert seen.params == {
        "q": "solar power",
        "count": "5",
        "offset": "0",
        "safesearch": "off",
        "search_lang": "fr",
    }
    assert out["provider"] == "brave" and out["total_results"] == 2
    assert out["results"][1] == {
        "title": "How solar panels work & more",
        "url": "https://example.com/solar",
        "snippet": "Photovoltaic cells explained.",
        "position": 2,
    }


async def test_google_sends_key_and_cx_and_reports_the_estimated_total(provider_server, monkeypatch):
    monkeypatch.setenv("GOOGLE_CSE_KEY", "g-key")
    monkeypatch.setenv("GOOGLE_CSE_CX", "g-cx")
    monkeypatch.setenv("GOOGLE_BASE_URL", provider_server.url)
    out = await WebSearchService().search("wind", provider="google", max_results=3)
    seen = provider_server.seen[-1]
    assert (seen.params["key"], seen.params["cx"], seen.params["num"], seen.params["safe"]) == (
        "g-key",
        "g-cx",
        "3",
        "active",
    )
    assert out["results"] == [
        {
            "title": "Wind power",
            "url": "https://example.org/wind",
            "snippet": "Wind turbines convert kinetic energy.",
            "position": 1,
        }
    ]
    assert out["estimated_total"] == 1230


async def test_searxng_asks_for_json_and_keeps_the_engine(provider_server, monkeypatch):
    monkeypatch.setenv("ECHO_SEARXNG_URL", provider_server.url)
    out = await WebSearchService().search("grid batteries", provider="searxng")
    assert provider_server.seen[0].params["format"] == "json"
    assert out["results"][0] == {
        "title": "Grid batteries",
        "url": "https://e.org/b",
        "snippet": "Batteries store solar energy.",
        "position": 1,
        "source": "echo-local",
    }


async def test_duckduckgo_html_is_parsed_links_unwrapped_and_ads_dropped(provider_server, monkeypatch):
    monkeypatch.setenv("DDG_BASE_URL", provider_server.url)
    out = await WebSearchService().search("heat pumps", provider="duckduckgo")
    assert provider_server.seen[-1].params["q"] == "heat pumps"
    assert out["results"] == [
        {
            "title": "Heat pumps explained",
            "url": "https://example.com/heat-pumps",
            "snippet": "A heat pump moves heat & saves energy.",
            "position": 1,
        },
        {
            "title": "Direct link",
            "url": "https://direct.example/page",
            "snippet": "Plain snippet",
            "position": 2,
        },
    ]
    assert unwrap_ddg_link("https://plain.example/x") == "https://plain.example/x"


def test_echoai_calls_with_provider_bing_are_answered_by_the_configured_provider():
    with running_local_search() as server:
        import os

        os.environ["ECHO_SEARXNG_URL"] = server.url
        try:
            result = invoke(
                "tool_web_search", {"query": "offshore wind turbines", "provider": "bing", "max_results": 3}
            )
        finally:
            del os.environ["ECHO_SEARXNG_URL"]
    assert result.success, result.error
    out = result.output
    assert out["provider"] == "searxng" and "retired" in out["note"]
    assert out["results"][0]["url"] == "https://offline.echo-tools.invalid/offshore-wind"
    assert [r["position"] for r in out["results"]] == list(range(1, len(out["results"]) + 1))


def test_auto_prefers_the_provider_named_in_the_environment(provider_server, monkeypatch):
    monkeypatch.setenv("ECHO_WEB_SEARCH_PROVIDER", "brave")
    result = invoke("Web Search", {"query": "solar"})
    assert not result.success
    assert "Search provider 'brave' is not configured: set BRAVE_API_KEY" in result.error


async def test_a_rejected_key_is_a_clear_execution_error(provider_server, monkeypatch):
    monkeypatch.setenv("BRAVE_API_KEY", "wrong")
    monkeypatch.setenv("BRAVE_BASE_URL", provider_server.url + "/denied")
    with pytest.raises(ToolExecutionError, match=r"refused the request \(HTTP 401\); check its key"):
        await WebSearchService().search("x", provider="brave")


async def test_an_unreachable_provider_names_the_url(monkeypatch):
    monkeypatch.setenv("ECHO_SEARXNG_URL", "http://127.0.0.1:9")
    with pytest.raises(ToolExecutionError, match="could not be reached at 'http://127.0.0.1:9/search'"):
        await WebSearchService().search("x", provider="searxng")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"query": "  "}, ValueError, "query is empty"),
        ({"query": "x", "provider": "altavista"}, ValueError, "provider 'altavista' is unknown"),
        ({"query": "x", "max_results": 0}, ValueError, "max_results must be between 1 and 50, got 0"),
        ({"query": "x", "provider": "google"}, ToolConfigError, "set GOOGLE_CSE_KEY and GOOGLE_CSE_CX"),
        ({"query": "x", "provider": "searxng"}, ToolConfigError, "set ECHO_SEARXNG_URL"),
    ],
)
async def test_bad_input_and_missing_configuration_name_the_problem(kwargs, error, message):
    with pytest.raises(error) as info:
        await WebSearchService().search(**kwargs)
    assert message in str(info.value)


def test_the_local_server_ranks_the_bundled_corpus_and_pages():
    with running_local_search() as server:
        import httpx

        body = httpx.get(
            f"{server.url}/search",
            params={"q": "power electricity costs energy agents tools language model", "format": "json"},
        ).json()
        page2 = httpx.get(
            f"{server.url}/search",
            params={
                "q": "power electricity costs energy agents tools language model",
                "format": "json",
                "pageno": 2,
            },
        ).json()
        refused = httpx.get(f"{server.url}/search", params={"q": "solar"})
    assert body["number_of_results"] > 10 and len(body["results"]) == 10
    assert body["results"][0]["score"] >= body["results"][-1]["score"]
    assert page2["results"][0]["positions"] == [11]
    assert refused.status_code == 403


async def test_providers_share_one_http_client_per_event_loop(provider_server, monkeypatch):
    from AgentTools._http import close_shared_client, shared_client

    monkeypatch.setenv("ECHO_SEARXNG_URL", provider_server.url)
    first = shared_client()
    await WebSearchService().search("grid batteries", provider="searxng")
    assert shared_client() is first
    await close_shared_client()
    assert first.is_closed and shared_client() is not first
    await close_shared_client()
