"""The capacity planning page in headless Chromium: an admin asks how many
h100 GPUs keep training-large's p90 wait under an hour, the plan runs (tasks
run in-process here), and its page shows the answer in GPUs and nodes, the
waits as durations (never raw seconds or floats) and the curve drawn; a
member finds no such page."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Guard, login, screenshot
from tests.jobs.conftest import Org, org
from tests.whatif.test_capacity_plan import steady
from whatif.models import CapacityPlan, PlanReplay, ReplayPartState, WhatIfState

pytestmark = pytest.mark.browser
__all__ = ["org", "steady"]

RAW_FLOAT = re.compile(r"\d+\.\d{2,}")


def test_an_admin_plans_and_reads_the_answer(
    page: Page, base_url: str, org: Org, steady: dict[str, datetime]
) -> None:
    login(page, "root", "root-password")
    page.get_by_role("link", name="Capacity").click()
    expect(page.get_by_role("heading", name="Capacity planning")).to_be_visible()
    expect(page.get_by_label("queue of target 0")).to_have_value("training-large")
    expect(page.get_by_label("longest wait of target 0")).to_have_value("1h")
    page.get_by_label("h100-spot").uncheck()
    page.get_by_label("Seeds (replays per capacity)").fill("1")
    page.get_by_role("button", name="Plan").click()
    plan = CapacityPlan.objects.get()
    expect(page).to_have_url(re.compile(rf"/capacity/{plan.pk}/$"), timeout=60_000)
    expect(page.locator("[data-state]")).to_have_text("succeeded", timeout=60_000)
    plan.refresh_from_db()
    assert plan.state == WhatIfState.SUCCEEDED
    answer = plan.result["flavors"][0]["answers"][0]
    card = page.locator('[data-flavor="h100"]')
    expect(card.locator("h2")).to_have_text(f"h100: {answer['gpus']} GPUs for every target")
    row = card.locator('tr[data-group="training-large"]')
    expect(row.locator("td").nth(0)).to_have_text("p90 wait of training-large ≤ 1 h")
    expect(row.locator("[data-gpus]")).to_have_text(f"{answer['gpus']} GPUs")
    more = answer["change"] // 8
    expect(row.locator("td").nth(2)).to_have_text(
        f"+{answer['change']} GPUs ({more} more nodes of 8)"
    )
    expect(card.locator(".chart .main-svg").first).to_be_attached()
    card.locator("summary", has_text="As a table").click()
    cells = card.locator("details table td").all_inner_texts()
    assert any(re.search(r"\d+ (min|h)", cell) for cell in cells), cells
    text = page.locator("main").inner_text()
    assert not RAW_FLOAT.search(text), RAW_FLOAT.findall(text)
    screenshot(page, "capacity-plan")
    # Had its replays been shared out, the page says who replayed them.
    done = ReplayPartState.DONE
    for gpus, worker, seconds, asked in [(48, "celery@a", 3.4, True), (56, "celery@b", 5.8, False)]:
        PlanReplay.objects.create(
            plan=plan, flavor="h100", gpus=gpus, seed=0, state=done, asked=asked,
            worker=worker, seconds=seconds,
        )  # fmt: skip
    page.reload()
    expect(page.locator("#capacity-workers")).to_have_text(
        "Replays shared out among the workers: celery@a, 1 replay in 3 s; celery@b, 1 replay "
        "in 6 s. 1 of them was replayed ahead of the search and not asked for."
    )
    text = page.locator("main").inner_text()
    assert not RAW_FLOAT.search(text), RAW_FLOAT.findall(text)
    screenshot(page, "capacity-plan-shared")


def test_a_member_finds_no_capacity_page(
    page: Page, guard: Guard, base_url: str, org: Org, steady: dict[str, Any]
) -> None:
    login(page, "alice", "alice-password")
    expect(page.get_by_role("link", name="Capacity")).to_have_count(0)
    answer = page.goto("/capacity/")
    assert answer is not None and answer.status == 404
    # The browser logs the 404 it was asked to load: that one is expected.
    assert [e for e in guard.console_errors if "/capacity/" not in e] == []
    guard.forgive()


def test_a_bad_target_is_refused_beside_its_field_and_nothing_is_stored(
    page: Page, base_url: str, org: Org, steady: dict[str, datetime]
) -> None:
    login(page, "root", "root-password")
    page.goto("/capacity/")
    page.get_by_label("longest wait of target 0").fill("soon")
    page.get_by_label("queue of target 1").fill("nope")
    page.get_by_label("longest wait of target 1").fill("1h")
    page.get_by_role("button", name="Plan").click()
    expect(page.locator('[data-error="targets[0].max_wait"]')).to_contain_text("duration")
    expect(page.locator('[data-error="targets[1].queue"]')).to_contain_text("'nope'")
    expect(page.locator("#capacity-targets ~ .field-error")).to_have_count(0)  # said once
    expect(page.get_by_label("longest wait of target 0")).to_have_value("soon")
    assert CapacityPlan.objects.count() == 0
    screenshot(page, "capacity-form-refused")
