"""Issue 35 in a real headless Chromium (tests/echo_tools/_browser_support.py): a page served on another
loopback port drives a keyless server (the default of `echo-tools serve`) with what a browser sends
cross-site without a preflight, a script-less `<form enctype=text/plain method=post>` and a `fetch` with a
`text/plain` body. The tool's side effect (a file it writes) stays absent; the same call sent as a client
that is not a browser writes it, so the test would see a call that ran.

Skipped, naming the install step, when Chromium or its driver is not installed.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import MemoryEventLog, ToolExecutor
from echo_tools.api import create_app
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools._browser_support import browser_or_skip, wait_for

pytestmark = pytest.mark.slow


@contextlib.contextmanager
def page_server(html: str) -> Iterator[str]:
    """`html` served at `/` by a plain HTTP server on another loopback port (the attacker's origin)."""
    body = html.encode("utf-8")

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, name="attacker-page", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.fixture
def keyless(tmp_path: Path) -> Iterator[tuple[str, MemoryEventLog]]:
    """A keyless server (no --api-key, on 127.0.0.1) with a tool that writes a file."""
    registry = support.make_registry(tmp_path / "tools", support.TOUCH)
    log = MemoryEventLog()
    executor = ToolExecutor(registry, event_sinks=[log])
    with support.serve_in_thread(create_app(registry, executor, ApiSettings())) as url:
        yield url, log
    executor.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_or_skip() as driver:
        yield driver


def form_page(action: str, target: Path) -> str:
    # text/plain encodes one field as `name=value`: the name opens a JSON object, the value closes it
    name = json.dumps({"path": str(target)})[:-1] + ', "text": "'
    return f"""<!doctype html><meta charset="utf-8"><title>attacker</title>
<form id="attack" method="post" enctype="text/plain" action="{action}">
<input type="hidden" name='{name}' value='"}}'><button id="go" type="submit">go</button></form>"""


def fetch_page(url: str, target: Path) -> str:
    body = json.dumps(json.dumps({"path": str(target)}))
    return f"""<!doctype html><meta charset="utf-8"><title>attacker</title>
<script>
window.sent = null;
for (const path of ["/tools/invoke/tool_touch", "/tools/invoke/id/tool_touch"]) {{
  fetch("{url}" + path, {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}},
                         body: {body}}})
    .then(() => {{ window.sent = (window.sent || 0) + 1; }}, (e) => {{ window.sent = "failed: " + e; }});
}}
</script>"""


def test_a_cross_site_text_plain_form_post_runs_no_tool(
    browser: Any, keyless: tuple[str, MemoryEventLog], tmp_path: Path
) -> None:
    url, log = keyless
    target = tmp_path / "form-ran.txt"
    with page_server(form_page(f"{url}/tools/invoke/tool_touch", target)) as attacker:
        browser.get(attacker)
        wait_for(browser, lambda d: d.find_elements("id", "go"), "the attacker's form")
        browser.find_element("id", "go").click()  # a person's click: no script needed
        # the form navigates the tab to the server's answer: the refusal, as the contract's JSON
        answer = wait_for(
            browser,
            lambda d: d.current_url.startswith(url) and d.find_element("tag name", "body").text,
            "the server's answer to the form",
        )
    assert not target.exists(), answer
    refusal = json.loads(answer)
    assert refusal["field"] == "headers.origin" and attacker in refusal["message"], answer
    assert log.of_type("tool.invoked") == []


def test_a_cross_site_text_plain_fetch_runs_no_tool(
    browser: Any, keyless: tuple[str, MemoryEventLog], tmp_path: Path
) -> None:
    url, log = keyless
    target = tmp_path / "fetch-ran.txt"
    with page_server(fetch_page(url, target)) as attacker:
        browser.get(attacker)
        # an opaque answer resolves the fetch once the server has answered it
        sent = wait_for(browser, lambda d: d.execute_script("return window.sent") == 2 or
                        str(d.execute_script("return window.sent")).startswith("failed"), "both answers")  # fmt: skip
    assert sent is True
    assert not target.exists()
    assert log.of_type("tool.invoked") == []
    # the control: the same call from a client that is not a browser runs the tool and writes the file
    response = httpx.post(f"{url}/tools/invoke/tool_touch", json={"path": str(target)}, timeout=30)
    assert response.status_code == 200, response.text
    assert target.read_text(encoding="utf-8") == "ran"
