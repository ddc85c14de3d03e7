"""Issue 35: no request does work proportional to the whole catalogue on the event loop, and stored text is
bounded. 100 tools of 0.9 MB descriptions and 16 searches made `/tools/health` wait 8.4 s, and
`/tools/list` answered 90 MB. Descriptions, schema titles and descriptions, tags and versions are bounded
at registration (422 naming the field and the size); the listings answer at most `LIST_LIMIT` tools a page;
a search runs on a worker thread, so health answers while one is still running."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools.api import create_app
from echo_tools.api.app import LIST_LIMIT
from echo_tools.definitions import MAX_ANNOTATION_CHARS, MAX_DESCRIPTION_CHARS
from echo_tools.errors import ToolRegistrationError
from echo_tools.executor import ToolExecutor
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support

KEY = {"X-API-Key": "catalogue-key-0123"}


@pytest.fixture
def registry(tmp_path: Path) -> Any:
    return support.make_registry(tmp_path / "tools", support.ECHO)


@pytest.fixture
def client(registry: Any) -> Iterator[httpx.Client]:
    executor = ToolExecutor(registry)
    app = create_app(registry, executor, ApiSettings(api_key=KEY["X-API-Key"]))
    with support.serve_in_thread(app) as url, httpx.Client(base_url=url, headers=KEY, timeout=60) as http:
        yield http
    executor.close()


def definition(name: str, **changes: Any) -> dict[str, Any]:
    return {**support.local_tool(name, "echo", {"text": {"type": "string"}}), **changes}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"description": "d" * (MAX_DESCRIPTION_CHARS + 1)}, "description"),
        ({"tags": ["t" * 200]}, "tags[0]"),
        ({"tags": [f"t{i}" for i in range(100)]}, "tags"),
        ({"version": "1." + "0" * 100}, "version"),
        ({"capabilities": ["c" * 200]}, "capabilities[0]"),
        (
            {"input_schema": {"type": "object", "properties": {"text": {"type": "string", "title": "t" * 20_000}}}},
            "input_schema.properties.text.title",
        ),
        (
            {"input_schema": {"type": "object", "properties": {
                f"p{i}": {"type": "string", "description": "d" * 10_000} for i in range(10)}}},
            "input_schema",
        ),
    ],
)  # fmt: skip
def test_oversized_stored_text_is_refused_at_registration_naming_the_field_and_the_size(
    client: httpx.Client, registry: Any, changes: dict[str, Any], field: str
) -> None:
    response = client.post("/tools/register", json=definition("Big", **changes))
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["field"] == field, body
    assert "at most" in body["message"] and "got" in body["message"]
    assert registry.get("tool_big") is None
    with pytest.raises(ToolRegistrationError):  # in-process registration too
        registry.register(definition("Big", **changes))


def test_text_within_the_bounds_is_registered(registry: Any) -> None:
    body = definition("Roomy", description="d" * MAX_DESCRIPTION_CHARS, tags=["a" * 128])
    body["input_schema"]["properties"]["text"]["description"] = "x" * MAX_ANNOTATION_CHARS
    registry.register(body)
    assert registry.get("tool_roomy").description == body["description"]


def test_the_list_answers_a_bounded_page_and_links_the_next(client: httpx.Client, registry: Any) -> None:
    for index in range(5):
        registry.register(definition(f"Tool {index}"))
    first = client.get("/tools/list", params={"limit": "2"})
    assert first.status_code == 200
    assert [t["tool_id"] for t in first.json()] == ["tool_0", "tool_1"]
    assert first.headers["X-Total-Count"] == "6"
    seen = [t["tool_id"] for t in first.json()]
    page = first
    while "next" in page.links:
        page = client.get(page.links["next"]["url"])
        seen += [t["tool_id"] for t in page.json()]
    assert seen == sorted(t.tool_id for t in registry.list_all())
    assert client.get("/tools/list").headers["X-Total-Count"] == "6"  # EchoAI's call: the first page
    too_many = client.get("/tools/list", params={"limit": str(LIST_LIMIT + 1)})
    assert too_many.status_code == 422 and too_many.json()["field"] == "query.limit"
    typed = client.get("/tools/list/type/local", params={"limit": "1"})
    assert len(typed.json()) == 1 and "next" in typed.links


def test_health_answers_while_a_search_is_still_running(client: httpx.Client, registry: Any) -> None:
    entered, release = threading.Event(), threading.Event()
    search = registry.search

    def slow_search(query: str, k: int | None = None) -> list[Any]:
        entered.set()
        release.wait(60)  # a search over a huge catalogue, held until the test lets it go
        return search(query, k) if k else search(query)

    registry.search = slow_search
    answers: list[httpx.Response] = []
    searcher = threading.Thread(
        target=lambda: answers.append(client.get("/tools/search", params={"q": "echo"}))
    )
    searcher.start()
    try:
        assert entered.wait(30)
        health = httpx.get(f"{client.base_url}/tools/health", timeout=15)  # the loop is free: it answers now
        assert health.status_code == 200 and health.json()["status"] == "healthy"
    finally:
        release.set()
        searcher.join(60)
    assert answers and [t["tool_id"] for t in answers[0].json()] == ["tool_echo"]
