"""The usage page in headless Chromium over October 2026
(tests/showback/scenario.py): plotly draws both charts, every number is
formatted (hours to one decimal, money to the cent with its currency), an
admin sees every team and a member only theirs; another team's page is a
404, logged; a bad month is named with its rule."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from accounts.models import AccessDenial
from tests.browser.conftest import Guard, login, screenshot
from tests.jobs.conftest import Org
from tests.showback.scenario import MONTH, October

pytestmark = pytest.mark.browser

# A number on the page: 1,234.5 GPU-hours, 1,234.56 USD, 72 %, or a dash.
HOURS = re.compile(r"^(\d{1,3}(,\d{3})*\.\d|< 0\.1|—)$")
MONEY = re.compile(r"^(\d{1,3}(,\d{3})*\.\d{2} USD|—)")
RAW_FLOAT = re.compile(r"\d\.\d{3,}")


@pytest.fixture
def scene(transactional_db: Any, org: Org, october: October) -> Org:
    return org


def cells(page: Page, column: str) -> list[str]:
    return [
        c.strip() for c in page.locator(f'#usage-table td[data-col="{column}"]').all_inner_texts()
    ]


def test_an_admin_sees_every_team_with_charts_and_formatted_figures(
    page: Page, guard: Guard, scene: Org
) -> None:
    login(page, "root", "root-password")
    response = page.goto(f"/usage/?month={MONTH}&group_by=team&group_by=type")
    assert response is not None and response.ok
    expect(page.get_by_role("heading", name=f"Usage and cost · {MONTH}")).to_be_visible()
    # plotly drew both charts.
    expect(page.locator("#chart-usage-hours .main-svg").first).to_be_visible()
    expect(page.locator("#chart-usage-cost .main-svg").first).to_be_visible()
    rows = page.locator("#usage-table tr[data-row]")
    assert rows.count() == 4  # three groups and the total
    labels = [
        r
        for r in page.locator("#usage-table tr[data-row]").evaluate_all(
            "rows => rows.map(r => r.dataset.row)"
        )
    ]
    assert labels == [
        "research · evaluation",
        "research · training",
        "serving · training",
        "total",
    ]
    assert cells(page, "allocated") == ["18.7", "32.0", "64.0"]
    assert cells(page, "cost") == ["16.29 USD", "83.76 USD", "175.68 USD"]
    assert cells(page, "lost") == ["2.7", "0.0", "0.0"]
    assert cells(page, "lost-cost") == ["2.33 USD", "—", "—"]
    for value in cells(page, "allocated") + cells(page, "busy") + cells(page, "lost"):
        assert HOURS.match(value), value
    for value in cells(page, "cost") + cells(page, "lost-cost"):
        assert MONEY.match(value), value
    total = page.locator('#usage-table tr[data-row="total"]').inner_text()
    assert "114.7" in total and "275.73 USD" in total
    expect(page.locator('[data-figure-name="cost"]')).to_have_text("275.73 USD")
    expect(page.locator('[data-figure-name="allocated"]')).to_have_text("114.7")
    # No raw float anywhere in what the page shows (the charts' data aside).
    shown = page.locator("main").inner_text()
    assert not RAW_FLOAT.search(shown.replace("0.8725", "")), RAW_FLOAT.findall(shown)
    screenshot(page, "usage-admin-team-type")
    # By team: every team's borrowing, whom from and to one team at a time.
    page.goto(f"/usage/?month={MONTH}&group_by=team")
    assert cells(page, "borrowed") == ["6.0", "0.0"] and cells(page, "lent") == ["0.0", "6.0"]
    expect(page.locator("#usage-counterparts")).to_contain_text("pick a team")
    screenshot(page, "usage-admin-team")
    page.get_by_label("Only team").select_option("research")
    page.get_by_role("button", name="Show").click()
    page.wait_for_load_state()
    expect(page.locator("#usage-table")).to_contain_text("serving 6.0")
    assert not guard.problems()


def test_a_member_sees_their_team_with_borrowing_and_not_another(
    page: Page, guard: Guard, scene: Org
) -> None:
    login(page, "alice", "alice-password")
    expect(page.locator("header")).to_contain_text("Usage")
    page.locator("header").get_by_role("link", name="Usage").click()
    page.get_by_label("Month (UTC)").select_option(MONTH)
    page.get_by_role("button", name="Show").click()
    page.wait_for_load_state()
    assert [r.strip() for r in page.locator("#usage-table td:first-child").all_inner_texts()] == [
        "research"
    ]
    expect(page.locator('#usage-table td[data-col="borrowed"]')).to_have_text("6.0")
    expect(page.locator("#usage-table")).to_contain_text("serving 6.0")
    expect(page.locator('[data-figure-name="cost"]')).to_have_text("100.05 USD")
    expect(page.locator("#chart-usage-hours .main-svg").first).to_be_visible()
    screenshot(page, "usage-member")
    before = AccessDenial.objects.count()
    refused = page.goto(f"/usage/?month={MONTH}&team=serving")
    assert refused is not None and refused.status == 404
    assert AccessDenial.objects.count() == before + 1
    bad = page.goto("/usage/?month=2026-13")
    assert bad is not None and bad.status == 400
    expect(page.locator("#usage-errors")).to_contain_text("month:")
    expect(page.locator("#usage-errors")).to_contain_text("(month-range)")
    # The 404 and the 400 asked for are the console's only errors.
    assert len(guard.console_errors) == 2 and not guard.page_errors
    guard.forgive()


def test_anonymous_is_sent_to_sign_in(page: Page, scene: Org) -> None:
    page.goto(f"/usage/?month={MONTH}")
    assert "/login/" in page.url
