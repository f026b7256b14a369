"""Headless Chromium against pytest-django's live server.

- ``chromium``: one Playwright and one Debian Chromium for all the browser tests
  (``make test`` installs it with scripts/ensure_browser.py; a missing browser
  fails the tests, it never skips them).
- ``page``: a new browser context per test, whose ``guard`` aborts and records
  every request to a host other than 127.0.0.1/localhost and every console
  error or uncaught page error; any of them fails the test at teardown.
- ``login(page, username, password)`` signs in through the real form at
  ``/login/``; ``screenshot(page, name)`` saves ``test-artifacts/screenshots/
  <name>.png`` at the repository root.

Playwright's sync API marks an asyncio loop as running on the main thread while
it is started, so Django's ORM would refuse to run there ("you cannot call this
from an async context"). Playwright is therefore package-scoped (stopped after
the last test under tests/browser, so the rest of the suite runs as usual) and
``DJANGO_ALLOW_ASYNC_UNSAFE`` is set only while it runs. The live server serves
from its own thread; these tests are transactional.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Page,
    Playwright,
    Request,
    Route,
    WebSocketRoute,
    sync_playwright,
)

REPO = Path(__file__).resolve().parents[2]
SCREENSHOTS = REPO / "test-artifacts" / "screenshots"
DEFAULT_CHROMIUM = "/usr/bin/chromium"
# DESIGN.md §7: what Debian's chromium needs to run headless here, and no traffic of its own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost"})
# In-page URLs that never reach a network.
LOCAL_SCHEMES = frozenset({"data", "about"})
VIEWPORT = {"width": 1280, "height": 800}
TIMEOUT_MS = 15_000


def chromium_path() -> str:
    return os.environ.get("BERTH_CHROMIUM", "").strip() or DEFAULT_CHROMIUM


def is_local(url: str) -> bool:
    """Whether a request to ``url`` stays on this machine (loopback or in-page)."""
    parts = urlsplit(url)
    if parts.scheme in LOCAL_SCHEMES:
        return True
    if parts.scheme == "blob":  # blob:http://localhost:8000/<uuid>: local if its origin is
        return is_local(url[len("blob:") :])
    return parts.scheme in ("http", "https", "ws", "wss") and parts.hostname in LOCAL_HOSTS


@dataclass
class Guard:
    """What one test's browser context did: every request, and what fails the test."""

    requests: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)  # aborted: never left the machine
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def on_route(self, route: Route) -> None:
        url = route.request.url
        if is_local(url):
            route.continue_()
        else:
            self.outside.append(url)
            route.abort("blockedbyclient")

    def on_websocket(self, ws: WebSocketRoute) -> None:
        if is_local(ws.url):
            ws.connect_to_server()
        else:
            self.outside.append(ws.url)
            ws.close(code=1008, reason="outside request blocked by the browser tests")

    def on_request(self, request: Request) -> None:
        self.requests.append(request.url)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            where = message.location
            self.console_errors.append(
                f"{message.text} ({where.get('url') or '?'}:{where.get('lineNumber', '?')})"
            )

    def on_page_error(self, error: Exception) -> None:
        self.page_errors.append(str(error))

    def watch(self, page: Page) -> None:
        page.on("console", self.on_console)
        page.on("pageerror", self.on_page_error)

    def problems(self) -> list[str]:
        """One line per thing that fails the test; empty when the page behaved."""
        return (
            [f"request to a host outside this machine (aborted): {url}" for url in self.outside]
            + [f"console error: {text}" for text in self.console_errors]
            + [f"uncaught page error: {text}" for text in self.page_errors]
        )

    def forgive(self) -> None:
        """Forget the failures recorded so far (for the tests of the guard itself)."""
        self.outside.clear()
        self.console_errors.clear()
        self.page_errors.clear()


@pytest.fixture(scope="package")
def chromium(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Browser]:
    """Debian's Chromium driven by Playwright, shared by the browser tests.

    Playwright refuses ``--user-data-dir`` in the launch args and always gives a
    launch a fresh temporary profile of its own; its driver is started with
    TMPDIR pointing into this run's tmp folder, so that profile is made there.
    """
    executable = chromium_path()
    if not os.access(executable, os.X_OK):
        pytest.fail(
            f"the browser tests need Chromium at {executable}: run `.venv/bin/python "
            "scripts/ensure_browser.py` (make test does), or set BERTH_CHROMIUM",
            pytrace=False,
        )
    profiles = tmp_path_factory.mktemp("chromium")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMPDIR", str(profiles))
        playwright: Playwright = sync_playwright().start()
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
            browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
            made = [p.name for p in profiles.iterdir() if "profile" in p.name]
            assert len(made) == 1, f"expected one fresh Chromium profile in {profiles}: {made}"
            try:
                yield browser
            finally:
                browser.close()
    finally:
        playwright.stop()


@pytest.fixture
def base_url(live_server: Any, transactional_db: Any) -> str:
    return str(live_server.url)


@pytest.fixture
def guard() -> Guard:
    return Guard()


@pytest.fixture
def context(chromium: Browser, base_url: str, guard: Guard) -> Iterator[BrowserContext]:
    context = chromium.new_context(
        base_url=base_url, viewport=VIEWPORT, service_workers="block", locale="en-GB"
    )
    context.set_default_timeout(TIMEOUT_MS)
    context.on("request", guard.on_request)
    context.on("page", guard.watch)  # pages opened by the page (popups) too
    context.route("**/*", guard.on_route)
    context.route_web_socket(re.compile(r".*"), guard.on_websocket)
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(context: BrowserContext, guard: Guard, request: pytest.FixtureRequest) -> Iterator[Page]:
    page = context.new_page()  # context.on("page") attaches the guard
    yield page
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed and not page.is_closed():
        screenshot(page, "FAILED-" + request.node.name)
    problems = guard.problems()
    if problems:
        pytest.fail(
            f"{request.node.nodeid}: the browser did what it must not:\n  " + "\n  ".join(problems),
            pytrace=False,
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    setattr(item, f"rep_{report.when}", report)  # for the failure screenshot above
    return report


def login(page: Page, username: str, password: str) -> None:
    """Sign in through the real form at /login/ (the page's context has the base URL)."""
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot as test-artifacts/screenshots/<name>.png."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "page"
    path = SCREENSHOTS / f"{safe}.png"
    page.screenshot(path=str(path), full_page=True)
    return path
