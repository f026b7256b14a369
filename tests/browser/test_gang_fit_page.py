"""The gang-fit page and a fragmented job's page in headless Chromium: the
map's numbers as the database and the placements say, formatted (no raw
float), the chart drawn, and the job telling why it waits with node counts."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.utils import timezone
from playwright.sync_api import Page, expect

from cluster.gang_fit import snapshot_gang_fit
from cluster.models import ObservedNode
from jobs import services as job_services
from tests.browser.conftest import Guard, login, screenshot
from tests.jobs.conftest import Org, job, org
from tests.jobs.test_explain_gang_fit import running_on
from tests.jobs.test_topology_requests import racked

__all__ = ["org"]  # the fixture, used by name

RAW_FLOAT = re.compile(r"\d\.\d{3,}")


def scattered(org: Org) -> int:
    """h100 on 6 nodes of 8 GPUs, 4 GPUs busy on each of the first four, an
    hour of snapshots, and alice's 3 x 8 job waiting: its id."""
    racked(org)
    names = list(
        ObservedNode.objects.filter(name__startswith="sim-h100-0").values_list("name", flat=True)
    )
    now = timezone.now().replace(microsecond=0)
    snapshot_gang_fit(now - timedelta(hours=1))  # all free an hour ago
    for index, node in enumerate(names[:4]):
        running_on(node, f"svc-{index}", 4)
    snapshot_gang_fit(now - timedelta(minutes=30))
    snapshot_gang_fit(now)
    submitted = job_services.submit(org.users["alice"], job(name="wide", nodes=3, gpus_per_node=8))
    return int(submitted.pk)


def test_the_gang_fit_page_shows_the_map_and_its_history(
    page: Page, guard: Guard, base_url: str, org: Org, transactional_db: Any
) -> None:
    scattered(org)
    login(page, "alice", "alice-password")
    page.goto("/gang-fit/")
    expect(page.locator("h1")).to_have_text("Gang fit · h100")
    expect(page.locator('[data-figure-name="free"]')).to_have_text("32")
    expect(page.locator("#gang-figures")).to_contain_text("GPUs free of 48 on 6 nodes")
    expect(page.locator('[data-figure-name="whole"]')).to_have_text("2")
    expect(page.locator("#gang-figures")).to_contain_text("(50 % of the free)")
    largest = page.locator("#gang-largest tr")
    # GPUs per node 8: 2 whole nodes anywhere, in one block, in one rack; 1 on one node.
    expect(largest.nth(4)).to_contain_text("2 × 8")
    expect(largest.nth(4).locator("small[title='h100-b0/h100-r1']")).to_have_text("h100-r1")
    expect(page.locator("#gang-histogram")).to_contain_text("4")
    expect(page.locator("#gang-nodes")).to_contain_text("4 of 8")
    expect(page.locator("#gang-fit-chart .main-svg").first).to_be_visible()
    body = page.locator("main").inner_text()
    assert not RAW_FLOAT.search(body), RAW_FLOAT.findall(body)
    screenshot(page, "gang-fit-member")
    # Live: a pod placed on a whole free node shows within a refresh, no reload.
    running_on("sim-h100-004", "svc-late", 4)
    expect(page.locator('[data-figure-name="free"]')).to_have_text("28")
    expect(page.locator('[data-figure-name="whole"]')).to_have_text("1")
    answer = page.goto("/gang-fit/?flavor=h100-spot")
    assert answer is not None and answer.status == 400
    expect(page.locator("#gang-errors")).to_contain_text(
        "flavor: 'h100-spot' is not a flavor that names a topology"
    )
    # The browser reports the 400 itself as a console error: that one is expected.
    assert all("400 (Bad Request)" in text for text in guard.console_errors)
    guard.forgive()


def test_a_fragmented_job_says_so_on_its_page(
    page: Page, guard: Guard, base_url: str, org: Org, transactional_db: Any
) -> None:
    job_id = scattered(org)
    login(page, "alice", "alice-password")
    page.goto(f"/jobs/{job_id}/")
    expect(page.locator("#job-fragmentation")).to_contain_text(
        "needs 3 nodes with 8 free GPUs each; 32 GPUs are free on flavor h100 but only "
        "2 nodes have 8 free (others: 4 nodes with 4)"
    )
    screenshot(page, "job-fragmented")
    page.locator("#job-fragmentation a").click()
    expect(page.locator("h1")).to_have_text("Gang fit · h100")
