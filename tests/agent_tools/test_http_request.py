"""http_request against a real server on 127.0.0.1, with the egress policy in the way where it should be."""

from __future__ import annotations

import json

import pytest

from AgentTools.http_request.service import HttpRequestService
from echo_tools.errors import EgressDeniedError, ToolExecutionError
from tests.agent_tools._http_support import Reply, recording_server
from tests.agent_tools._support import invoke


def _echo(seen):
    return Reply(
        body={
            "method": seen.method,
            "params": seen.params,
            "body": seen.body.decode(),
            "auth": seen.headers.get("authorization"),
        }
    )


@pytest.fixture
def server():
    routes = {
        "/echo": _echo,
        "/big": lambda seen: Reply(body="x" * 5000, content_type="text/plain"),
        "/to-echo": lambda seen: Reply(302, b"", headers={"Location": "/echo"}),
        "/to-metadata": lambda seen: Reply(
            302, b"", headers={"Location": "http://169.254.169.254/latest/meta-data/"}
        ),
        "/loop": lambda seen: Reply(302, b"", headers={"Location": "/loop"}),
        "/html": lambda seen: Reply(body="<p>hi</p>", content_type="text/html"),
    }
    with recording_server(routes) as running:
        yield running


@pytest.fixture
def loopback_allowed(monkeypatch):
    monkeypatch.setenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", "1")


def test_a_get_with_query_returns_status_headers_and_parsed_json(server, loopback_allowed):
    result = invoke("tool_http_request", {"url": f"{server.url}/echo", "query": {"q": "solar", "page": 2}})
    assert result.success, result.error
    out = result.output
    assert out["status_code"] == 200 and out["ok"] is True
    assert out["json"]["params"] == {"q": "solar", "page": "2"}
    assert out["headers"]["content-type"] == "application/json"
    assert out["truncated"] is False


async def test_a_post_sends_objects_as_json_and_strings_as_is(server, loopback_allowed):
    service = HttpRequestService()
    out = await service.request(f"{server.url}/echo", method="post", body={"a": 1})
    assert out["json"]["method"] == "POST" and json.loads(out["json"]["body"]) == {"a": 1}
    assert server.seen[-1].headers["content-type"] == "application/json"
    raw = await service.request(
        f"{server.url}/echo", method="PUT", body="plain text", headers={"Content-Type": "text/plain"}
    )
    assert raw["json"]["body"] == "plain text"


def test_loopback_is_refused_unless_the_environment_allows_it(server, monkeypatch):
    monkeypatch.delenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", raising=False)
    result = invoke("HTTP Request", {"url": f"{server.url}/echo"})
    assert not result.success
    assert "loopback addresses are not allowed" in result.error
    assert server.seen == []  # refused before any connection


@pytest.mark.parametrize(
    "url",
    ["http://10.1.2.3/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:9/", "file:///etc/passwd"],
)
async def test_private_link_local_and_non_http_urls_are_refused(url, monkeypatch):
    monkeypatch.delenv("ECHO_TOOLS_EGRESS_ALLOW_LOOPBACK", raising=False)
    with pytest.raises(EgressDeniedError):
        await HttpRequestService().request(url)


async def test_redirects_are_followed_and_each_hop_is_checked(server, loopback_allowed):
    service = HttpRequestService()
    out = await service.request(f"{server.url}/to-echo")
    assert out["url"] == f"{server.url}/echo" and out["redirects"] == [f"{server.url}/to-echo"]
    with pytest.raises(EgressDeniedError, match="link-local"):
        await service.request(f"{server.url}/to-metadata")
    with pytest.raises(ToolExecutionError, match="redirected more than 5 times"):
        await service.request(f"{server.url}/loop")


async def test_credentials_are_not_forwarded_to_another_host(server, loopback_allowed):
    other = server.url.replace("127.0.0.1", "localhost")
    server.routes["/cross"] = lambda seen: Reply(302, b"", headers={"Location": f"{other}/echo"})
    out = await HttpRequestService().request(
        f"{server.url}/cross", headers={"Authorization": "Bearer secret"}
    )
    assert server.seen[0].headers["authorization"] == "Bearer secret"
    assert out["json"]["auth"] is None


async def test_the_response_is_capped(server, loopback_allowed):
    out = await HttpRequestService().request(f"{server.url}/big", max_response_bytes=100)
    assert out["body"] == "x" * 100 and out["truncated"] is True and "json" not in out


async def test_an_unreachable_server_is_a_clear_execution_error(loopback_allowed):
    with pytest.raises(ToolExecutionError, match="failed: ConnectError"):
        await HttpRequestService().request("http://127.0.0.1:9/")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"method": "TRACE"}, "method 'TRACE' is not supported"),
        ({"headers": {"X-Bad": "a\r\nInjected: 1"}}, "headers['X-Bad'] must be a single-line string"),
        ({"timeout_seconds": 0}, "timeout_seconds must be in (0, 120], got 0"),
        ({"max_response_bytes": 0}, "max_response_bytes must be between 1"),
    ],
)
async def test_bad_input_names_the_field_and_value(server, loopback_allowed, kwargs, message):
    with pytest.raises(ValueError) as info:
        await HttpRequestService().request(f"{server.url}/echo", **kwargs)
    assert message in str(info.value)


async def test_a_slow_server_times_out_with_a_clear_error(server, loopback_allowed):
    import threading

    release = threading.Event()

    def slow(seen):
        release.wait(10)  # held until the client has given up, then answered
        return Reply(body={"late": True})

    server.routes["/slow"] = slow
    try:
        with pytest.raises(ToolExecutionError, match=r"GET '.*/slow' timed out after 0.3 s"):
            await HttpRequestService().request(f"{server.url}/slow", timeout_seconds=0.3)
    finally:
        release.set()
