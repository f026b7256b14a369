"""The quota grant pages in headless Chromium: a team member asks for a loan
through the form (refused first for a zero amount, naming the field), sees
whose lendable capacity shrinks and who would be preempted; a global approver
is refused an approval without acknowledging the preemption, then approves
(the policy changes), and ends it (the policy goes back)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from cluster.models import WorkloadRecord, WorkloadState
from grants.models import GrantState, QuotaGrant
from grants.policy import NOMINAL, current
from queues.models import ClusterQueue
from tests import factories
from tests.browser.conftest import Guard, login, screenshot

pytestmark = pytest.mark.browser
GPU = "nvidia.com/gpu"


@pytest.fixture
def org(transactional_db: Any, queue_class_templates: None, settings: Any) -> dict[str, Any]:
    """Role users (tests.factories.role_users); alpha-train and beta-train, 8
    h100 GPUs each in one cohort; beta runs two 4-GPU workloads."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    people = factories.role_users()
    factories.flavor("h100")
    factories.cohort("shared")
    for team in ("alpha", "beta"):
        factories.cluster_queue(
            f"{team}-train", team=team, cohort="shared", resource_groups=factories.gpu_groups()
        )
    now = timezone.now()
    for name, priority in (("nightly-eval", 10), ("serving-canary", 1000)):
        WorkloadRecord.objects.create(
            uid=f"uid-{name}", namespace="beta", name=name, cluster_queue="beta-train",
            state=WorkloadState.ADMITTED, priority=priority, created_at=now,
            admitted_at=now - timedelta(hours=1),
            pod_sets=[{"name": "main", "count": 1, "requests": {GPU: 4}}],
            flavors={"main": {GPU: "h100"}},
        )  # fmt: skip
    return people


def nominal(name: str) -> int | None:
    return current(ClusterQueue.objects.get(name=name), "h100", GPU, NOMINAL)


def sign_in(page: Page, username: str) -> None:
    login(page, username, f"{username}-password")
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def test_ask_for_a_loan_approve_it_with_acknowledgement_and_end_it(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any]
) -> None:
    sign_in(page, "member-a")
    page.locator("#nav-grants").click()
    expect(page.locator("h1")).to_have_text("Quota grants")
    expect(page.locator("#grant-list")).to_contain_text("No open quota grants.")
    page.locator("#ask-for-quota").click()

    page.get_by_label("ClusterQueue").select_option("alpha-train")
    page.get_by_label("What").select_option("loan")
    page.get_by_label("Lender").select_option("beta-train")
    page.get_by_label("Flavor").select_option("h100")
    page.get_by_label("Amount").fill("0")
    page.get_by_label("Justification").fill("release 2026.12 training")
    page.get_by_role("button", name="Ask").click()
    error = page.locator('#grant-form [data-field="amount"]')
    expect(error).to_have_attribute("data-rule", "positive")
    expect(error).to_have_text("must be more than zero")
    assert not QuotaGrant.objects.exists()
    screenshot(page, "grant-request-refused")

    page.get_by_label("Amount").fill("4")
    page.get_by_role("button", name="Ask").click()
    grant = QuotaGrant.objects.get()
    expect(page.locator("h1")).to_contain_text(f"Quota grant #{grant.pk}")
    expect(page.locator("#grant-state")).to_have_text("pending")
    expect(page.locator("#grant-what")).to_contain_text("+4 h100 nvidia.com/gpu nominal quota")
    expect(page.locator('#shrinks-table tr[data-queue="beta-train"]')).to_contain_text("8 → 4")
    expect(page.locator('#preempts-table tr[data-victim="beta/nightly-eval"]')).to_be_visible()
    expect(page.locator("#approve-form")).to_have_count(0)  # not hers to decide
    expect(page.locator("#end-form")).to_be_visible()  # but hers to withdraw
    screenshot(page, "grant-pending-member")

    page.get_by_role("button", name="Sign out").click()
    sign_in(page, "global-approver")
    page.goto(f"/grants/{grant.pk}/")
    page.locator("#approve-form").get_by_role("button", name="Approve").click()
    refusal = page.locator('#approve-form [data-field="acknowledge_preemption"]')
    expect(refusal).to_contain_text("beta/nightly-eval")
    expect(page.locator("#grant-state")).to_have_text("pending")
    assert (nominal("alpha-train"), nominal("beta-train")) == (8, 8)
    screenshot(page, "grant-approve-unacknowledged")

    page.locator("#acknowledge").check()
    page.locator("#approve-form").get_by_role("button", name="Approve").click()
    said = f"Approved and applied: grant #{grant.pk}"
    expect(page.locator("#grant-messages")).to_contain_text(said)
    expect(page.locator("#grant-state")).to_have_text("active")
    expect(page.locator("#grant-decision")).to_contain_text("preemption acknowledged")
    expect(page.locator("#grant-applied")).to_contain_text("beta-train")
    assert (nominal("alpha-train"), nominal("beta-train")) == (12, 4)
    screenshot(page, "grant-active")

    page.get_by_placeholder("why (optional)").fill("release shipped")
    page.locator("#end-form").get_by_role("button", name="End").click()
    expect(page.locator("#grant-state")).to_have_text("ended")
    expect(page.locator("#grant-ended")).to_contain_text("release shipped")
    expect(page.locator('#grant-applied tr[data-reverted="beta-train"]')).to_contain_text("4")
    assert (nominal("alpha-train"), nominal("beta-train")) == (8, 8)
    assert QuotaGrant.objects.get().state == GrantState.ENDED
    page.goto("/grants/?all=1")
    expect(page.locator(f'#grant-list tr[data-grant="{grant.pk}"]')).to_contain_text("ended")
    screenshot(page, "grants-list-all")
    assert all(url.startswith(f"{base_url}/") for url in guard.requests), guard.requests
