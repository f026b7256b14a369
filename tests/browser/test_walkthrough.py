"""A new user's walk through the demo, in headless Chromium: the demo
organisation after some hours of simulated load (admissions, borrowing,
preemptions, a job submitted through Berth), visited as the platform admin, a
research member and the global approver. From the Overview, every page the
navigation and the pages' own links reach is opened, and the walk fails on:

- a link that answers 404 or 500 (or any error);
- a console error or a request off the machine (the ``page`` fixture's guard);
- visible text holding an ISO timestamp, a Python or Go repr (``<nil>``,
  ``{'``, ``None``) or a raw stored quantity (a milli-value such as
  ``117091m``, or a bare count of bytes).

Links into the API (JSON, YAML) are only checked for their status; the Django
admin console and the API's Swagger page are someone else's pages and are not
walked.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from io import StringIO
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest
from django.core.management import call_command
from playwright.sync_api import Page, expect

from controlplane.embedded import EmbeddedLoop
from jobs import services as job_services
from queues.models import SimulatedClock
from queues.simulation.runner import MAX_LOAD_GAP
from tests.browser.conftest import Guard, login

pytestmark = pytest.mark.browser

ROLES = {"admin": "admin-demo", "alice": "alice-demo", "approver": "approver-demo"}
# Not walked: others' pages (the admin console, Swagger), and what signs out or downloads.
SKIP = ("/admin/", "/api/docs/", "/api/schema/", "/logout/", "/static/", "/vendor/", "/login/")
DOWNLOADS = (".csv", ".yaml", ".json")
# At most this many pages of one shape (/jobs/N/, /queues/NAME/…) and in all.
PER_SHAPE, PAGES = 3, 60
ISO_TIME = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d")
# "None pending." is English; "stop_policy: None" or "(None)" is Python talking.
REPRS = re.compile(r"<nil>|\{'|[:=(\[]\s*None\b|^None$|object at 0x", re.M)
MILLI = re.compile(r"(?<![\w.-])\d{4,}m\b")
# Not part of a name (the demo's job names carry a Unix time).
BYTES = re.compile(r"(?<![\w./-])\d{10,}(?![\w-])")
# The page's visible text without what it shows as data — Kubernetes YAML
# (pre), values in code style (where "None" is Kueue's own stopPolicy value) —
# or a select's options; the argument is a selector of what to leave out.
VISIBLE_TEXT = """(leaveOut) => {
  const hidden = Array.from(document.querySelectorAll(leaveOut));
  hidden.forEach((el) => { el.dataset.walkDisplay = el.style.display; el.style.display = "none"; });
  const text = document.querySelector("main").innerText;
  hidden.forEach((el) => { el.style.display = el.dataset.walkDisplay; });
  return text;
}"""


@pytest.fixture
def demo_under_load(transactional_db: Any, queue_class_templates: None, settings: Any) -> None:
    """The demo organisation after a few hours of simulated load, synced."""
    settings.BERTH_DEMO_LOAD = True
    settings.BERTH_RECONCILE_RETRY_BASE = 0.001
    call_command("seed_demo", "--quiet-logins", stdout=StringIO())
    loop = EmbeddedLoop()
    for _ in range(4):
        # Each step covers the load generator's longest gap of simulated time.
        SimulatedClock.objects.filter(pk=1).update(last_tick=time.time() - MAX_LOAD_GAP)
        loop.last_snapshot = loop.last_forecast = float("-inf")
        loop.run_once()
    from django.contrib.auth import get_user_model

    alice = get_user_model().objects.get(username="alice")
    job_services.submit(
        alice,
        {
            "name": "qwen-sft",
            "team": "research",
            "image": "registry.example.com/qwen-trainer:2026.05",
            "queue": "training-large",
            "nodes": 2,
            "gpus_per_node": 8,
            "checkpoint_uri": "s3://bucket/qwen-sft",
            "command": ["python", "train.py"],
        },
    )
    loop.last_snapshot = loop.last_forecast = float("-inf")
    loop.run_once()


def shape(path: str) -> str:
    return re.sub(r"/\d+/", "/N/", path)


def problems_on(page: Page) -> list[str]:
    shown = str(page.evaluate(VISIBLE_TEXT, "main pre, main select"))
    prose = str(page.evaluate(VISIBLE_TEXT, "main pre, main select, main code"))
    found = []
    for label, pattern, words in (
        ("an ISO timestamp", ISO_TIME, shown),
        ("a Python or Go repr", REPRS, prose),
        ("a raw milli-value", MILLI, shown),
        ("a bare byte count", BYTES, shown),
    ):
        match = pattern.search(words)
        if match:
            start = max(0, match.start() - 60)
            found.append(f"{label}: …{words[start : match.end() + 40]!r}…")
    return found


@pytest.mark.parametrize("username", sorted(ROLES))
def test_every_reachable_page_is_sound(
    page: Page, guard: Guard, base_url: str, demo_under_load: None, username: str
) -> None:
    login(page, username, ROLES[username])
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    queue, seen, shapes = ["/"], set(), Counter()
    failures: list[str] = []
    api_links: set[str] = set()
    while queue and len(seen) < PAGES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        response = page.goto(path)
        status = response.status if response else 0
        if status >= 400 or status == 0:
            failures.append(f"{path}: answered {status}")
            continue
        failures += [f"{path}: {problem}" for problem in problems_on(page)]
        for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
            parts = urlsplit(urljoin(base_url + path, href))
            if f"{parts.scheme}://{parts.netloc}" != base_url:
                continue
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            if target.startswith("/api/") or parts.path.endswith(DOWNLOADS):
                api_links.add(target)  # data, not a page: its status only
            elif (
                not target.startswith(SKIP)
                and target not in seen
                and shapes[shape(parts.path)] < PER_SHAPE
            ):
                shapes[shape(parts.path)] += 1
                queue.append(target)
    for target in sorted(api_links):
        status = page.request.get(target).status
        if status >= 400:
            failures.append(f"{target} (linked): answered {status}")
    assert len(seen) >= 10, f"the walk reached only {sorted(seen)}"
    assert not failures, f"{username} found, in {len(seen)} pages:\n" + "\n".join(failures)
