"""The policy editor in headless Chromium: an admin changes a quota, reads the
plan, applies it and finds it on the policy page and in the history."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from queues.models import PolicyChange, Quota
from tests import factories
from tests.browser.conftest import Guard, login, screenshot

pytestmark = pytest.mark.browser

NOMINAL_PATH = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"


@pytest.fixture
def org(transactional_db: Any, queue_class_templates: None, settings: Any) -> dict[str, Any]:
    """Users in every role (tests.factories.role_users), two flavors and one team
    queue with 16 GPUs of h100 in cohort ``shared``."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    people = factories.role_users()
    factories.flavor("h100")
    factories.flavor("h100-spot", capacity_type="spot")
    factories.cohort("shared")
    factories.cluster_queue(
        "alpha",
        team="alpha",
        cohort="shared",
        queue_class="training-large",
        resource_groups=factories.gpu_groups(nominal="16"),
    )
    return people


def sign_in(page: Page, username: str) -> None:
    login(page, username, f"{username}-password")  # what tests.factories.user gives everyone
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def assert_only_local_requests(guard: Guard, base_url: str) -> None:
    assert guard.requests, "the page made no request at all"
    assert all(url.startswith(f"{base_url}/") for url in guard.requests), guard.requests


def gpus() -> int:
    return Quota.objects.get(cluster_queue__name="alpha", flavor__name="h100").nominal_quota


def test_an_admin_plans_then_applies_a_quota_change(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any]
) -> None:
    sign_in(page, "admin")
    page.locator("header").get_by_role("link", name="Policy", exact=True).click()
    expect(page.locator("h1")).to_have_text("Policy")
    page.locator('tr[data-queue="alpha"]').get_by_role("link", name="Edit").click()
    expect(page.locator("h1")).to_contain_text("ClusterQueue alpha")

    nominal = page.get_by_label("Nominal of h100 nvidia.com/gpu")
    expect(nominal).to_have_value("16")
    nominal.fill("24")
    changes = PolicyChange.objects.count()
    page.get_by_role("button", name="Plan", exact=True).click()

    plan = page.locator("#plan")
    expect(plan).to_contain_text("1 object would change")
    change = plan.locator('[data-object="ClusterQueue/alpha"]')
    expect(change).to_contain_text("update")
    row = change.locator(f'tr[data-path="{NOMINAL_PATH}"]')
    expect(row.locator("del")).to_have_text("16")
    expect(row.locator("ins")).to_have_text("24")
    expect(plan.locator("tr[data-path]")).to_have_count(1)  # nothing else would change
    expect(page.get_by_label("Nominal of h100 nvidia.com/gpu")).to_have_value("24")
    assert (gpus(), PolicyChange.objects.count()) == (16, changes)  # Plan saved nothing
    screenshot(page, "policy-plan")

    page.get_by_role("button", name="Apply", exact=True).click()
    expect(page.locator("#applied")).to_contain_text("Applied.")
    expect(page.locator("#applied")).to_contain_text("nominal_quota")
    assert gpus() == 24
    entry = PolicyChange.objects.latest("id")
    assert (entry.actor_username, entry.object_name) == ("admin", "alpha")

    page.get_by_role("link", name="← Policy").click()
    quota = page.locator('tr[data-queue="alpha"] [data-quota="h100/nvidia.com/gpu"]')
    expect(quota).to_contain_text("h100 nvidia.com/gpu: 24")
    newest = page.locator("#history tr[data-change-id]").first
    expect(newest).to_have_attribute("data-change-id", str(entry.pk))
    expect(newest).to_contain_text("admin")
    expect(newest).to_contain_text("alpha")
    expect(newest).to_contain_text("resource_groups[0].flavors[0].resources[0].nominal_quota")
    expect(newest.locator("del")).to_have_text("16")
    expect(newest.locator("ins")).to_have_text("24")
    screenshot(page, "policy-applied")
    assert_only_local_requests(guard, base_url)


def test_a_refused_quota_names_the_field_and_rule(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any]
) -> None:
    sign_in(page, "admin")
    page.goto("/policy/cluster-queue/alpha/")
    expect(page.get_by_role("button", name="Add flavor to group 1")).to_be_visible()
    # Enter plans: it never presses the "Add flavor" button that comes first.
    page.get_by_label("Lending limit of h100 nvidia.com/gpu").fill("32")
    page.get_by_label("Lending limit of h100 nvidia.com/gpu").press("Enter")
    errors = page.locator("#policy-errors")
    expect(errors).to_contain_text("resource_groups[0].flavors[0].resources[0].lending_limit")
    expect(errors).to_contain_text("lending-limit-above-nominal")
    expect(page.get_by_label("Lending limit of h100 nvidia.com/gpu")).to_have_attribute(
        "aria-invalid", "true"
    )
    expect(page.locator("#policy-message")).to_have_count(0)  # no row was added
    expect(page.locator('tr[data-quota="h100-spot/nvidia.com/gpu"]')).to_have_count(0)
    page.get_by_role("button", name="Apply", exact=True).click()
    expect(errors).to_contain_text("lending-limit-above-nominal")
    assert gpus() == 16
    assert_only_local_requests(guard, base_url)


def test_members_see_no_editor(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any]
) -> None:
    sign_in(page, "member-a")
    expect(page.locator("header").get_by_role("link", name="Policy", exact=True)).to_have_count(0)
    response = page.goto("/policy/")
    assert response is not None and response.status == 404
    assert_only_local_requests(guard, base_url)
    # Chromium logs every 404 it loads as a console error; this one is the point.
    assert all("status of 404" in line for line in guard.console_errors), guard.console_errors
    guard.forgive()
