"""Debian's headless Chromium for tests, driven by Playwright.

Playwright's wheel carries its own driver, and ``executable_path`` points it at
the system browser, so nothing is downloaded. A missing browser fails the test
that needs it rather than skipping it: CI installs one, and a skipped browser
test would hide a page that no longer renders.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, ConsoleMessage, Page, Request

CHROMIUM = "/usr/bin/chromium"
TIMEOUT_MS = 30_000

# Without the background-networking flags Chromium keeps calling Google's hosts,
# which this closed network refuses (and the refusals are noise in the logs).
FLAGS = [
    "--no-sandbox",  # tests run as root, where Chromium's sandbox will not start
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless browser, closed afterwards; the test fails if it cannot be had."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} not found: install Debian's Chromium for the browser tests "
            "(apt-get update && apt-get install -y chromium)",
            pytrace=False,
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "playwright is not installed: pip install -e '.[dev]' (it brings its own "
            "driver; the browser is Debian's Chromium, nothing is downloaded)",
            pytrace=False,
        )
    with sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=FLAGS, timeout=TIMEOUT_MS
        )
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Visit:
    """What the browser reported while a page loaded and was looked at."""

    page: Page
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every fetch the page asked for
    failed: list[tuple[str, str]] = field(default_factory=list)  # (url, why) of those refused


@contextmanager
def visit(browser: Browser, path: Path, *, width: int = 1100) -> Iterator[Visit]:
    """Open a local file and listen to everything it logs and fetches."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    seen = Visit(page)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            seen.console_errors.append(message.text)

    def on_request(request: Request) -> None:
        seen.requests.append(request.url)

    page.on("console", on_console)
    page.on("pageerror", lambda error: seen.page_errors.append(str(error)))

    def on_failed(request: Request) -> None:
        seen.failed.append((request.url, request.failure or ""))

    page.on("request", on_request)
    page.on("requestfailed", on_failed)
    try:
        page.goto(path.resolve().as_uri(), wait_until="load")
        yield seen
    finally:
        context.close()


def artifact_path(name: str, fallback: Path) -> Path:
    """Where CI keeps files for people to look at ($SWARM_ARTIFACTS), else the test's own dir."""
    folder = os.environ.get("SWARM_ARTIFACTS")
    target = Path(folder) if folder else fallback
    target.mkdir(parents=True, exist_ok=True)
    return target / name
