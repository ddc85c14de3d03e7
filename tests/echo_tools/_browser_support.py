"""A real headless Chromium for the run viewer's tests and benchmark (Debian's `chromium` and
`chromium-driver`, driven by selenium), started offline: no network, no first-run, a fresh profile.

`chromium()` answers a driver, or raises `ChromiumMissing` naming the install step when Chromium is
absent; `browser_or_skip()` turns that into a skipped test. The benchmark (bench/bench_viewer.py) uses
`chromium()` too.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.echo_tools._api_support import free_port

INSTALL_HINT = (
    "needs Chromium and its driver: apt-get update && apt-get install -y chromium chromium-driver "
    "(.ci/run does it), and selenium (pip install -e '.[test]')"
)
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)
REQUIRE_ENV = "ECHO_TOOLS_REQUIRE_BROWSER"
WAIT_S = 30.0  # bounded waits for what the page shows


class ChromiumMissing(RuntimeError):
    """Chromium, its driver or selenium is not installed (the message says how to install them)."""


def chromium_paths() -> tuple[str, str] | None:
    """`(chromium, chromedriver)` when both are installed."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium under selenium with a fresh profile folder, quit and removed at the end."""
    paths = chromium_paths()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        paths = None
    if paths is None:
        raise ChromiumMissing(INSTALL_HINT)
    profile = tempfile.mkdtemp(prefix="echo-tools-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in (*FLAGS, f"--user-data-dir={profile}", f"--remote-debugging-port={free_port()}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=paths[1]), options=options)
    try:
        driver.set_page_load_timeout(WAIT_S)
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def browser_or_skip() -> Iterator[Any]:
    """`chromium()` in a test: skipped, naming the install step, when Chromium is absent (failed instead
    when `ECHO_TOOLS_REQUIRE_BROWSER` is set, as `.ci/run` sets it: CI must run these tests)."""
    import pytest

    with contextlib.ExitStack() as stack:
        try:
            driver = stack.enter_context(chromium())
        except ChromiumMissing as exc:
            if os.environ.get(REQUIRE_ENV):
                pytest.fail(f"{REQUIRE_ENV} is set and the browser tests cannot run: {exc}")
            pytest.skip(str(exc))
        yield driver


def wait_for(driver: Any, check: Callable[[Any], Any], what: str, seconds: float = WAIT_S) -> Any:
    """What `check(driver)` answers once it is truthy (selenium's bounded wait); fails naming `what`."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, seconds, poll_frequency=0.05).until(check)
    except TimeoutException:
        problems = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        raise AssertionError(f"the page never showed {what}; browser errors: {problems}") from None


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return driver.find_elements(By.CSS_SELECTOR, selector)


def click(driver: Any, selector: str, what: str) -> None:
    """Click the element matching `selector`, found again if the live page redrew it meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException

    def clicked(d: Any) -> bool:
        try:
            found = css(d, selector)
            if found:
                found[0].click()
            return bool(found)
        except StaleElementReferenceException:
            return False

    wait_for(driver, clicked, what)


def text_of(driver: Any, selector: str) -> str:
    """The text of the first element matching `selector`, read in one step (the page redraws live)."""
    found = driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e && e.textContent", selector
    )
    return found or ""


def sign_in(driver: Any, key: str) -> None:
    """Type the key into the page's login form and send it."""
    field = wait_for(
        driver, lambda d: next((e for e in css(d, "#key") if e.is_displayed()), None), "the key form"
    )
    field.send_keys(key)
    css(driver, "#login-form button[type=submit]")[0].click()


def save_png(driver: Any, path: Path) -> Path:
    """A screenshot of the page as it is, as a PNG file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(driver.get_screenshot_as_png())
    return path


def paint_ms(driver: Any, what: str) -> float:
    """Milliseconds from the page's navigation to the first paint of its `what` data ("runs" or "run")."""
    return float(
        driver.execute_script(
            "const m = performance.getEntriesByName(arguments[0]); return m.length ? m[0].startTime : null;",
            f"echo:{what}-painted",
        )
    )


def page_json(driver: Any) -> Any:
    return json.loads(driver.find_element("tag name", "body").text)
