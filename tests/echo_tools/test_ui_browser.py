"""The run viewer in a real headless Chromium (tests/echo_tools/_browser_support.py) against a real
server on 127.0.0.1 with an API key: a run appears live, its timeline opens, its pause is approved from
the page; hostile strings stay text; the key form; an unknown run; the keyboard; the docs' screenshots.

Skipped, naming the install step, when Chromium or its driver is not installed.
"""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from echo_tools import ToolExecutor
from echo_tools.api import create_app
from echo_tools.history import RunHistory
from echo_tools.settings import ApiSettings
from tests.echo_tools import _api_support as support
from tests.echo_tools._browser_support import (
    browser_or_skip,
    click,
    css,
    save_png,
    sign_in,
    text_of,
    wait_for,
)

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
KEY = "viewer-browser-key-42"
SCREENSHOTS = ROOT / "docs"  # `make screenshots` refreshes the committed PNGs there

GATED: dict[str, Any] = {
    "workflow": {
        "workflow_id": "wf_gated",
        "name": "Add, then ask",
        "execution_model": "sequential",
        "agents": ["adder", "gate", "end"],
        "connections": [{"from": "adder", "to": "gate"}, {"from": "gate", "to": "end"}],
    },
    "agents": {
        "adder": {
            "agent_id": "adder",
            "name": "Adder",
            "role": "Adder",
            "prompt": 'Add: {"operation": "add", "values": [2, 3]}',
            "tools": ["tool_calculator"],
            "metadata": {"node_type": "Agent"},
        },
        "gate": {
            "agent_id": "gate",
            "name": "Review",
            "role": "Reviewer",
            "metadata": {"node_type": "HITL", "hitl_config": {"title": "Ship the sum?"}},
        },
        "end": {
            "agent_id": "end",
            "name": "End",
            "role": "Workflow exit point",
            "output_schema": ["result"],
            "metadata": {"node_type": "End"},
        },
    },
}
APPROVED_ECHO = support.local_tool("Approved Echo", "echo", {"text": {"type": "string"}}, approval="always")
# nobody decides in time: its approvals expire at once (ToolDef.approval_ttl_s)
HASTY_ECHO = support.local_tool(
    "Hasty Echo", "echo", {"text": {"type": "string"}}, approval="always", approval_ttl_s=0.001
)
HOSTILE_TEXT = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
HOSTILE_AGENT = '<img src=y onerror="window.pwned = 3">Agent'


def hostile_workflow() -> dict[str, Any]:
    """A workflow whose agent (named with markup) sends markup to the text tool, which returns it."""
    source = copy.deepcopy(GATED)
    source["workflow"].update(workflow_id="wf_hostile", agents=["writer", "end"])
    source["workflow"]["connections"] = [{"from": "writer", "to": "end"}]
    text = HOSTILE_TEXT.replace('"', '\\"')
    source["agents"] = {
        "writer": {
            "agent_id": "writer",
            "name": HOSTILE_AGENT,
            "role": "Writer",
            "prompt": f'Lower it: {{"operation": "case", "case": "lower", "text": "{text}"}}',
            "tools": ["tool_text_tools"],
            "metadata": {"node_type": "Agent"},
        },
        "end": GATED["agents"]["end"],
    }
    return source


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, RunHistory]]:
    """A server with the shipped tools, a run history and an API key, on 127.0.0.1 for this module."""
    storage = tmp_path_factory.mktemp("viewer") / "tools"
    registry = support.make_registry(storage, support.WAITER, APPROVED_ECHO, HASTY_ECHO)
    registry.discover_local_tools([ROOT / "AgentTools"])
    history = RunHistory(storage)
    executor = ToolExecutor(registry, event_sinks=[history])
    app = create_app(registry, executor, ApiSettings(api_key=KEY), history=history)
    with support.serve_in_thread(app) as url:
        yield url, history
    executor.close()
    history.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_or_skip() as driver:
        yield driver


def start_run(url: str, source: dict[str, Any], run_id: str) -> str:
    """POST /workflows/run; returns its event stream's text once the run paused or ended."""
    response = httpx.post(
        f"{url}/workflows/run", json={**source, "run_id": run_id}, headers={"X-API-Key": KEY}, timeout=120
    )
    assert response.status_code == 200, response.text
    assert "event: run.completed" in response.text, response.text[-500:]
    return response.text


def open_viewer(browser: Any, url: str, fragment: str = "#/") -> None:
    """The viewer in this tab, signed in (the key is kept in the tab's sessionStorage)."""
    browser.get(f"{url}/ui/{fragment}")
    if not browser.execute_script("return sessionStorage.getItem('echo-tools-api-key')"):
        sign_in(browser, KEY)
    view = "run" if fragment.startswith("#/run/") else "runs"
    wait_for(
        browser, lambda d: d.execute_script("return document.body.dataset.painted") == view, f"its {view}"
    )


def status_in(browser: Any, selector: str) -> str:
    return text_of(browser, selector)


def test_a_run_appears_live_opens_as_a_timeline_and_completes_when_its_pause_is_approved(
    served: tuple[str, RunHistory], browser: Any
) -> None:
    url, history = served
    open_viewer(browser, url)
    wait_for(browser, lambda d: status_in(d, "#live") == "live", "the live stream connected")

    start_run(url, GATED, "run_gated_live")  # after the page loaded: it must show up without a reload

    row = 'tr[data-run-id="run_gated_live"]'
    wait_for(browser, lambda d: status_in(d, f"{row} .badge") == "interrupted", "the paused run in the list")
    css(browser, f"{row} a")[0].click()
    wait_for(browser, lambda d: css(d, "form.pause"), "the pause's decision form")
    assert css(browser, "form.pause h3")[0].text == "Ship the sum?"
    call = css(browser, "#timeline details.call")[0]
    assert "Calculator" in call.text and "by Adder" in call.text and "completed" in call.text
    call.find_element("css selector", "summary").click()
    opened = wait_for(
        browser, lambda d: call.find_elements("css selector", "pre"), "the call's input and output"
    )
    shown = [pre.text for pre in opened]
    assert any('"operation": "add"' in text for text in shown)  # its input
    assert any('"result": 5' in text for text in shown)  # its output

    click(browser, 'form.pause button[data-decision="approve"]', "the approve button")

    wait_for(browser, lambda d: status_in(d, "#run-facts .badge") == "completed", "the run completed")
    assert css(browser, "form.pause") == []
    assert history.run("run_gated_live")["status"] == "completed"


def test_a_running_runs_calls_and_status_change_on_its_page_as_they_happen(
    served: tuple[str, RunHistory], browser: Any
) -> None:
    url, history = served
    waiting = copy.deepcopy(GATED)
    waiting["workflow"].update(workflow_id="wf_wait", agents=["waiter", "end"])
    waiting["workflow"]["connections"] = [{"from": "waiter", "to": "end"}]
    waiting["agents"] = {
        "waiter": {
            "agent_id": "waiter",
            "name": "Waiter",
            "role": "Waiter",
            "prompt": "Call the waiter tool.",
            "tools": ["tool_waiter"],
            "metadata": {"node_type": "Agent"},
        },
        "end": GATED["agents"]["end"],
    }
    support.RELEASE.clear()
    support.ENTERED.clear()
    runner = threading.Thread(target=start_run, args=(url, waiting, "run_waiting"), daemon=True)
    runner.start()
    try:
        assert support.ENTERED.wait(120), "the waiter tool was never called"
        open_viewer(browser, url, "#/run/run_waiting")
        assert status_in(browser, "#run-facts .badge") == "running"
        wait_for(
            browser, lambda d: status_in(d, "#timeline details.call .badge") == "running", "the call running"
        )
    finally:
        support.RELEASE.set()  # the tool returns: its call and then the run finish while the page is open
    runner.join(120)

    wait_for(
        browser, lambda d: status_in(d, "#timeline details.call .badge") == "completed", "the call completed"
    )
    wait_for(browser, lambda d: status_in(d, "#run-facts .badge") == "completed", "the run completed")
    assert history.run("run_waiting")["status"] == "completed"


def test_a_tool_call_waiting_for_approval_is_approved_from_the_page(
    served: tuple[str, RunHistory], browser: Any
) -> None:
    url, _ = served
    keyed = {"X-API-Key": KEY}
    asked = httpx.post(f"{url}/tools/invoke/Approved Echo", json={"text": "<b>ship it</b>"}, headers=keyed)
    assert asked.status_code == 202, asked.text
    approval_id = asked.json()["result"]["metadata"]["approval_id"]
    open_viewer(browser, url)
    item = f'li.approval[data-approval-id="{approval_id}"]'

    wait_for(browser, lambda d: css(d, item), "the approval")
    assert "Approved Echo waits for approval" in text_of(browser, item)
    assert "<b>ship it</b>" in text_of(browser, item)
    click(browser, f'{item} button[data-decision="approve"]', "the approve button")

    wait_for(browser, lambda d: not css(d, item), "the approval decided")
    record = httpx.get(f"{url}/tools/approvals/{approval_id}", headers=keyed).json()
    assert record["status"] == "done" and record["result"]["output"] == {"echo": "<b>ship it</b>"}


def test_a_runs_tool_call_waiting_for_approval_is_decided_on_the_runs_page(
    served: tuple[str, RunHistory], browser: Any
) -> None:
    url, history = served
    source = copy.deepcopy(GATED)
    source["workflow"].update(workflow_id="wf_approve", agents=["poster", "end"])
    source["workflow"]["connections"] = [{"from": "poster", "to": "end"}]
    source["agents"] = {
        "poster": {
            "agent_id": "poster",
            "name": "Poster",
            "role": "Poster",
            "prompt": 'Post: {"text": "deploy at noon"}',
            "tools": ["tool_approved_echo"],
            "metadata": {"node_type": "Agent"},
        },
        "end": GATED["agents"]["end"],
    }
    start_run(url, source, "run_tool_approval")
    assert history.run("run_tool_approval")["status"] == "interrupted"
    open_viewer(browser, url, "#/run/run_tool_approval")

    form = 'form.pause[data-kind="tool_approval"]'
    wait_for(browser, lambda d: css(d, form), "the approval form")
    assert "tool_approved_echo waits for approval (asked by Poster)" in text_of(browser, form)
    assert "deploy at noon" in text_of(browser, form)
    click(browser, f'{form} button[data-decision="approve"]', "the approve button")

    wait_for(browser, lambda d: status_in(d, "#run-facts .badge") == "completed", "the run completed")
    calls = browser.execute_script(  # read in one step: the page may still be redrawing the finished run
        "return [...document.querySelectorAll('#timeline details.call summary')].map((e) => e.textContent)"
    )
    assert any("Approved Echo" in text and "completed" in text for text in calls), calls


def test_an_expired_approval_of_a_paused_run_shows_as_expired_not_as_a_decision(
    served: tuple[str, RunHistory], browser: Any
) -> None:
    url, history = served
    source = copy.deepcopy(GATED)
    source["workflow"].update(workflow_id="wf_hasty", agents=["poster", "end"])
    source["workflow"]["connections"] = [{"from": "poster", "to": "end"}]
    source["agents"] = {
        "poster": {
            "agent_id": "poster",
            "name": "Poster",
            "role": "Poster",
            "prompt": 'Post: {"text": "too late"}',
            "tools": ["tool_hasty_echo"],
            "metadata": {"node_type": "Agent"},
        },
        "end": GATED["agents"]["end"],
    }
    start_run(url, source, "run_hasty_approval")
    assert history.run("run_hasty_approval")["status"] == "interrupted"
    keyed = {"X-API-Key": KEY}
    (ask,) = httpx.get(f"{url}/workflows/runs/run_hasty_approval", headers=keyed).json()["state"][
        "__interrupt__"
    ]
    record = httpx.get(f"{url}/tools/approvals/{ask['approval_id']}", headers=keyed).json()
    assert record["status"] == "expired", record
    open_viewer(browser, url, "#/run/run_hasty_approval")

    expired = '#pauses [data-kind="tool_approval"][data-status="expired"]'
    wait_for(browser, lambda d: css(d, expired), "the expired approval")
    assert "expired" in text_of(browser, f"{expired} .badge")
    assert "no longer decidable" in text_of(browser, expired)
    assert not css(browser, 'form.pause[data-kind="tool_approval"]')  # nothing to decide
    listed = httpx.get(f"{url}/tools/approvals", headers=keyed).json()["approvals"]
    assert ask["approval_id"] not in [a["approval_id"] for a in listed]  # not pending any more


def test_hostile_strings_in_tool_inputs_outputs_and_names_render_as_text(
    served: tuple[str, RunHistory], browser: Any
) -> None:
    url, _ = served
    start_run(url, hostile_workflow(), "run_hostile")
    open_viewer(browser, url, "#/")
    wait_for(browser, lambda d: css(d, 'tr[data-run-id="run_hostile"]'), "the hostile run in the list")
    assert HOSTILE_AGENT in css(browser, 'tr[data-run-id="run_hostile"]')[0].text

    open_viewer(browser, url, "#/run/run_hostile")
    call = wait_for(browser, lambda d: css(d, "#timeline details.call"), "the call")[0]
    call.find_element("css selector", "summary").click()
    opened = wait_for(
        browser, lambda d: call.find_elements("css selector", "pre"), "the call's input and output"
    )
    shown = "\n".join(pre.text for pre in opened)

    assert HOSTILE_TEXT.replace('"', '\\"') in shown  # the input, as JSON text
    assert HOSTILE_TEXT.lower().replace('"', '\\"') in shown  # the output the tool lowered
    assert HOSTILE_AGENT in call.text
    assert css(browser, "main img") == [] and css(browser, "main script") == []
    assert browser.execute_script("return window.pwned") is None


def test_without_the_key_the_page_shows_only_its_key_form(
    served: tuple[str, RunHistory], browser: Any
) -> None:
    url, _ = served
    start_run(url, GATED, "run_behind_the_key")
    browser.get(f"{url}/ui/")
    browser.execute_script("sessionStorage.clear()")
    browser.refresh()

    wait_for(browser, lambda d: css(d, "#key") and css(d, "#key")[0].is_displayed(), "the key form")
    assert "run_behind_the_key" not in browser.page_source
    sign_in(browser, "not-the-key-000")
    wait_for(browser, lambda d: "refused" in status_in(d, "#login-error"), "the refusal")
    sign_in(browser, KEY)
    wait_for(
        browser, lambda d: css(d, 'tr[data-run-id="run_behind_the_key"]'), "the runs once the key is given"
    )


def test_an_unknown_run_says_so_naming_it(served: tuple[str, RunHistory], browser: Any) -> None:
    url, _ = served
    open_viewer(browser, url)
    browser.get(f"{url}/ui/#/run/run_nowhere")

    message = wait_for(browser, lambda d: status_in(d, "#error"), "an error")
    assert "'run_nowhere'" in message


def test_the_viewer_is_usable_with_the_keyboard_alone(served: tuple[str, RunHistory], browser: Any) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    url, history = served
    start_run(url, GATED, "run_by_keyboard")
    open_viewer(browser, url)
    wait_for(browser, lambda d: css(d, 'tr[data-run-id="run_by_keyboard"]'), "the run")

    def tab_to(check: str, most: int = 60) -> None:
        for _ in range(most):
            ActionChains(browser).send_keys(Keys.TAB).perform()
            if browser.execute_script(f"return !!document.activeElement.matches({check!r})"):
                return
        raise AssertionError(f"Tab never reached {check}")

    tab_to('tr[data-run-id="run_by_keyboard"] a')
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    wait_for(browser, lambda d: css(d, "form.pause"), "the run's pause")
    tab_to("details.call summary")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    assert css(browser, "details.call")[0].get_attribute("open") is not None
    tab_to('button[data-decision="approve"]')
    ActionChains(browser).send_keys(Keys.ENTER).perform()

    wait_for(browser, lambda d: status_in(d, "#run-facts .badge") == "completed", "the run completed")
    assert history.run("run_by_keyboard")["status"] == "completed"


def test_the_docs_screenshots_show_the_runs_and_a_paused_run(
    served: tuple[str, RunHistory], browser: Any, tmp_path: Path
) -> None:
    url, _ = served
    start_run(url, GATED, "run_docs_approved")
    approved = httpx.post(
        f"{url}/workflows/runs/run_docs_approved/resume",
        json={"decision": "approve", "comment": "sum checked"},
        headers={"X-API-Key": KEY},
        timeout=120,
    )
    assert approved.json()["status"] == "completed"
    start_run(url, GATED, "run_docs_paused")
    folder = SCREENSHOTS if os.environ.get("ECHO_TOOLS_SCREENSHOTS") else tmp_path
    open_viewer(browser, url, "#/?workflow_id=wf_gated")
    wait_for(browser, lambda d: css(d, 'tr[data-run-id="run_docs_paused"]'), "the run")
    runs = save_png(browser, folder / "viewer-runs.png")
    open_viewer(browser, url, "#/run/run_docs_paused")
    wait_for(browser, lambda d: css(d, "form.pause"), "the pause")
    css(browser, "details.call summary")[0].click()
    wait_for(browser, lambda d: css(d, "details.call pre"), "the call's input and output")
    browser.set_window_size(1280, 1350)  # the pause and the opened call in one picture
    try:
        run = save_png(browser, folder / "viewer-run.png")
    finally:
        browser.set_window_size(1280, 900)

    for path in (runs, run):
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_chromium_the_browser_tests_skip_naming_the_install_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.echo_tools._browser_support import ChromiumMissing, chromium

    monkeypatch.setenv("PATH", "")  # neither chromium nor chromedriver can be found

    with pytest.raises(ChromiumMissing, match=r"apt-get install -y chromium chromium-driver"):
        with chromium():
            pass
