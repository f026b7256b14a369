"""Times in the viewer's own zone: pages write them relative ("5 min ago"),
the hover shows the absolute time in the browser's zone, and charts draw their
time axes in it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page

from cluster.models import CapacitySnapshot
from tests import factories
from tests.browser.conftest import VIEWPORT, login

pytestmark = pytest.mark.browser


@pytest.fixture
def tokyo(chromium: Browser, base_url: str) -> Iterator[Page]:
    context = chromium.new_context(
        base_url=base_url, viewport=VIEWPORT, locale="en-GB", timezone_id="Asia/Tokyo"
    )
    try:
        yield context.new_page()
    finally:
        context.close()


def test_times_are_shown_in_the_viewers_zone(tokyo: Page, transactional_db: Any) -> None:
    people = factories.role_users()
    now = timezone.now().replace(microsecond=0)
    for minutes in (0, 30):
        CapacitySnapshot.objects.create(
            at=now - timedelta(minutes=minutes), flavor="h100", resource="nvidia.com/gpu",
            allocatable=32, largest_node=8, nodes=4,
        )  # fmt: skip
    factories.flavor("h100")
    login(tokyo, people["admin"].username, "admin-password")
    tokyo.goto("/profile/")
    tokyo.get_by_role("button", name="Create token").click()
    title = tokyo.locator("#tokens time").first.get_attribute("title") or ""
    assert "GMT+9" in title or "JST" in title, title
    tokyo.goto("/")
    tokyo.wait_for_function("document.querySelector('#chart-capacity-history .xtitle')")
    axis = tokyo.locator("#chart-capacity-history .xtitle").text_content()
    assert axis == "time (your time)"
