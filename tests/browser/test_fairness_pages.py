"""Fair shares on the Overview and the team page, in headless Chromium: a
starved team named with its share as a percentage per labelled window, never
a raw float; a platform admin gives the team its own threshold through the
form (a bad one refused naming the field and rule); a member of another team
sees the starved team named but not linked."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from playwright.sync_api import Page, expect

from accounts.models import AccessDenial
from approvals.fairness_alerts import evaluate_fair_shares
from queues import services
from queues.models import PolicyChange, TeamFairness
from tests.browser.conftest import login, screenshot
from tests.cluster.test_fairness import build_scenario, starve_research
from tests.factories import user

pytestmark = pytest.mark.browser
RAW_FLOAT = re.compile(r"\d\.\d{3,}|\b0\.\d+\b")


def starved(db: Any) -> None:
    scenario = build_scenario()
    starve_research(scenario)
    evaluate_fair_shares(scenario.now)
    user("admin", superuser=True)
    user("vic")
    services.set_membership(
        actor=None, team=scenario.teams["vision"], username="vic", role="member", present=True
    )


def no_raw_floats(text: str) -> None:
    assert not RAW_FLOAT.search(text), text


def test_the_overview_names_the_starved_team_with_percentages(
    page: Page, base_url: str, transactional_db: Any
) -> None:
    starved(transactional_db)
    login(page, "admin", "admin-password")
    page.goto("/")
    card = page.locator("#fair-shares")
    expect(card.locator("#fair-share-starved")).to_contain_text("1 team starved")
    row = card.locator('[data-starved-team="research"]')
    expect(row.get_by_role("link", name="research")).to_be_visible()
    expect(row).to_contain_text("since")
    cells = row.locator("td").all_inner_texts()
    assert cells[1:5] == ["0 %", "—", "50 %", "8 GPUs"], cells
    headers = card.locator("th").all_inner_texts()
    assert headers == ["Team", "Last hour", "Last 24 h", "Below", "Waiting"], headers
    no_raw_floats(card.inner_text())
    screenshot(page, "fair-shares-overview-admin")

    page.goto("/teams/")
    shares = {
        team: page.locator(f'[data-team="{team}"] [data-fair-share]').inner_text()
        for team in ("research", "vision")
    }
    assert shares == {"research": "0 % · starved", "vision": "—"}, shares


def test_the_team_page_shows_each_window_and_an_admin_sets_the_teams_threshold(
    page: Page, base_url: str, transactional_db: Any
) -> None:
    starved(transactional_db)
    login(page, "admin", "admin-password")
    page.goto("/teams/research/")
    card = page.locator("#fair-share")
    expect(card.locator("#fair-share-status")).to_contain_text("Starved of its fair share")
    expect(card.locator("#fair-share-status")).to_contain_text("8 GPUs of its work waited")
    windows = {
        w: card.locator(f'[data-fair-window="{w}"] td').all_inner_texts()
        for w in ("1h", "24h", "7d")
    }
    assert windows["1h"] == ["last hour", "1 h", "0", "8", "0 %"], windows
    assert windows["24h"][0] == "last 24 hours" and windows["24h"][4] == "—"  # an hour of a day
    assert windows["7d"][0] == "last 7 days"
    no_raw_floats(card.inner_text())
    screenshot(page, "fair-share-team-admin")

    form = page.locator("#fair-share-form")
    form.get_by_label("The team's own threshold").fill("0.12345")
    form.get_by_role("button", name="Save").click()
    errors = page.locator("#fair-share-errors")
    expect(errors).to_contain_text("starved_below")
    expect(errors).to_contain_text("more than 3 decimals")
    expect(errors).to_contain_text("(fraction)")
    expect(page.locator("#fair-share-threshold")).to_contain_text("Starved below 50 %")

    page.locator("#fair-share-form").get_by_label("The team's own threshold").fill("0.25")
    page.locator("#fair-share-form").get_by_role("button", name="Save").click()
    expect(page.locator("#fair-share-threshold")).to_contain_text(
        "Starved below 25 % of its share (the team's own threshold)"
    )
    expect(page.locator("#fair-share-form").get_by_label("The team's own threshold")).to_have_value(
        "0.25"
    )
    # The change is in the team's history, by the admin who made it.
    change = PolicyChange.objects.filter(kind="team", action="updated").get()
    assert change.actor_username == "admin"
    assert change.after == {"fair_share_starved_below": "0.25"}


def test_a_member_of_another_team_sees_the_starved_team_unlinked(
    page: Page, base_url: str, transactional_db: Any
) -> None:
    starved(transactional_db)
    login(page, "vic", "vic-password")
    page.goto("/")
    row = page.locator('#fair-shares [data-starved-team="research"]')
    expect(row).to_contain_text("research")
    expect(row.get_by_role("link")).to_have_count(0)
    page.goto("/teams/vision/")
    expect(page.locator("#fair-share-status")).to_contain_text("Nothing of the team waits now")
    expect(page.locator("#fair-share-form")).to_have_count(0)


def test_only_a_platform_admin_may_set_a_teams_threshold(transactional_db: Any) -> None:
    starved(transactional_db)
    member = Client()
    member.force_login(get_user_model().objects.get(username="vic"))
    refused = member.post("/teams/vision/", {"starved_below": "0.1"})
    assert refused.status_code == 404
    assert not TeamFairness.objects.filter(
        team__slug="vision", starved_below__isnull=False
    ).exists()
    denial = AccessDenial.objects.get()
    assert "fair-share threshold by a non-admin" in denial.detail
    admin = Client()
    admin.force_login(get_user_model().objects.get(username="admin"))
    saved = admin.post("/teams/vision/", {"starved_below": "0.1"})
    assert saved.status_code == 302 and saved["Location"] == "/teams/vision/#fair-share"
    assert str(TeamFairness.objects.get(team__slug="vision").starved_below) == "0.100"
    admin.post("/teams/vision/", {"starved_below": ""})
    assert TeamFairness.objects.get(team__slug="vision").starved_below is None
