"""Importing a Kueue installation in headless Chromium: an admin uploads the
hand-written installation, reads the plan (what Berth would store, every field
it cannot represent, the class guesses, the takeover), then imports it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from queues.models import ClusterQueue
from tests import factories
from tests.browser.conftest import Guard, login, screenshot

pytestmark = pytest.mark.browser

INSTALLATION = Path(__file__).resolve().parents[1] / "kueue_import" / "installation.yaml"


@pytest.fixture
def admin(transactional_db: Any, queue_class_templates: None, settings: Any) -> None:
    settings.BERTH_RECONCILE_ON_CHANGE = False
    factories.user("admin", superuser=True)


def test_an_admin_plans_then_imports_an_installation(
    page: Page, guard: Guard, base_url: str, admin: None
) -> None:
    login(page, "admin", "admin-password")
    page.goto(f"{base_url}/policy/")
    page.get_by_role("link", name="Import from Kueue").click()
    expect(page.locator("h1")).to_have_text("Import a Kueue installation")
    page.locator('input[name="files"]').set_input_files(str(INSTALLATION))
    page.get_by_label("Team label").fill("org.example/team")
    page.get_by_role("button", name="Plan", exact=True).click()

    expect(page.locator("#import-plan-note")).to_contain_text("Nothing was stored")
    expect(page.locator("#import-dropped li")).to_have_count(2)
    expect(page.locator("#import-queues tbody tr")).to_have_count(5)
    expect(page.locator("#import-queues")).to_contain_text("urgent-release")
    expect(page.locator("#import-skipped")).to_contain_text("capacity-check")
    expect(page.locator("#import-takeover")).to_contain_text("a reconcile writes nothing")
    assert not ClusterQueue.objects.exists()
    screenshot(page, "kueue-import-plan")

    # The file input does not keep its file across the post: choose it again.
    page.locator('input[name="files"]').set_input_files(str(INSTALLATION))
    page.get_by_role("button", name="Import", exact=True).click()
    expect(page.locator("#import-applied")).to_contain_text("imported from files uploaded by admin")
    assert ClusterQueue.objects.count() == 5
    screenshot(page, "kueue-import-applied")
