"""A what-if run's page in headless Chromium while the run replays: it shows
the figures so far as a first answer, marked so, refines them live as the
run stores later ones, and shows the answer once the run is done."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from queues.display import duration
from tests.browser.conftest import login, screenshot
from tests.jobs.conftest import Org, org
from tests.whatif.test_whatif_task import congested, running_run
from whatif import service as whatif
from whatif.models import ReplayPart, WhatIfRun, WhatIfState
from whatif.runs import write_so_far

pytestmark = pytest.mark.browser
__all__ = ["congested", "org"]

RAW_FLOAT = re.compile(r"\d+\.\d{2,}")


def test_a_running_run_shows_its_figures_so_far_then_the_answer(
    page: Page,
    base_url: str,
    org: Org,
    congested: dict[str, datetime],
    django_capture_on_commit_callbacks: Any,
) -> None:
    run = running_run(org, congested, django_capture_on_commit_callbacks, progress=10)
    prepared = whatif.prepared_for(run)
    readings: list[dict[str, Any]] = []
    ticks = iter(range(1_000_000))
    final = whatif.compare(
        prepared.today,
        prepared.proposal,
        prepared.stream(),
        so_far=readings.append,
        every=0.0,
        clock=lambda: float(next(ticks)),
    )
    assert len(readings) >= 2
    write = write_so_far(run.pk)
    write(readings[0])
    # As if shared out: one part replayed, one still replaying on another worker.
    _, replaying = ReplayPart.objects.bulk_create(
        [
            ReplayPart(
                run=run,
                index=0,
                groups=["research"],
                workloads=12,
                state="done",
                worker="celery@worker-a",
                seconds=1.4,
            ),
            ReplayPart(
                run=run,
                index=1,
                groups=["serving"],
                workloads=2,
                state="running",
                worker="celery@worker-b",
                share=0.42,
            ),
        ]
    )

    login(page, "root", "root-password")
    page.goto(f"/whatif/{run.pk}/")
    banner = page.locator("#whatif-so-far")
    expect(banner).to_contain_text("So far, not the answer yet")
    expect(banner).to_contain_text("of 3 h")
    totals = page.locator("#whatif-totals")
    expect(totals.locator('tr[data-metric="never_admitted"] td').first).to_have_text(
        "not admitted yet"
    )
    parts = page.locator("#whatif-parts li")
    expect(parts).to_have_count(2)
    expect(parts.nth(1)).to_have_text(
        "Part 2, 1 cohort tree (serving), 2 workloads: celery@worker-b replaying, 42%"
    )
    text = page.locator("main").inner_text()
    assert not RAW_FLOAT.search(text), RAW_FLOAT.findall(text)
    screenshot(page, "whatif-so-far")

    # A later reading reaches the open page without a reload.
    later = readings[-1]
    write(later)
    assert later["partial"]["simulated_seconds"] > readings[0]["partial"]["simulated_seconds"]
    expect(banner).to_contain_text(
        f"through the first {duration(later['partial']['simulated_seconds'])} of 3 h",
        timeout=8000,
    )

    ReplayPart.objects.filter(pk=replaying.pk).update(state="done", seconds=2.0, share=1.0)
    WhatIfRun.objects.filter(pk=run.pk).update(
        state=WhatIfState.SUCCEEDED, result=final, progress=100
    )
    expect(page.locator("[data-state]")).to_have_text("succeeded", timeout=8000)
    expect(page.locator("#whatif-so-far")).to_have_count(0)
    expect(parts.nth(1)).to_have_text(
        "Part 2, 1 cohort tree (serving), 2 workloads: replayed by celery@worker-b in 2 s"
    )
    expect(totals.locator('tr[data-metric="never_admitted"] td').first).to_have_text(
        "never admitted"
    )
