"""The approvals pages in headless Chromium: an approver finds a request
through the nav badge and the inbox, is refused a Reject without a reason, then
approves; what the page says is what the database holds. The inbox updates
itself when a new request arrives."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from approvals.models import ApprovalAction, ApprovalEvent, ApprovalRequest, ApprovalState
from queues.models import Team
from tests import factories
from tests.browser.conftest import Guard, login, screenshot

pytestmark = pytest.mark.browser

VICTIM = {
    "workload": "beta/job-nightly-eval",
    "status": "would-be-preempted",
    "team": "beta",
    "job_id": None,
    "job": "nightly-eval",
    "priority": 1000,
    "priority_class": "train-low",
    "gpus": 8,
    "running_seconds": 7200,
    "checkpoints": True,
    "since_checkpoint_seconds": 1200,
    "gpu_hours_lost": 2.67,
}


@pytest.fixture
def org(transactional_db: Any, queue_class_templates: None, settings: Any) -> dict[str, Any]:
    """Users in every role (tests.factories.role_users), the shared ``urgent``
    queue, and one pending request of team alpha's, asked by member-a: the
    alpha approver (approver-a) may decide it."""
    settings.BERTH_RECONCILE_ON_CHANGE = False
    people = factories.role_users()
    factories.flavor("h100")
    factories.cohort("shared")
    factories.cluster_queue(
        "urgent",
        cohort="shared",
        queue_class="urgent-release",
        resource_groups=factories.gpu_groups(nominal="8"),
    )
    people["request"] = asked(people["member_a"], "uid-alpha-1", "job-release-fix")
    return people


def asked(requester: Any, uid: str, name: str) -> ApprovalRequest:
    """A pending request of team alpha's in ``urgent``, asked just now."""
    now = timezone.now()
    request = ApprovalRequest.objects.create(
        workload_uid=uid,
        namespace="alpha",
        workload_name=name,
        cluster_queue="urgent",
        local_queue="urgent",
        team=Team.objects.get(slug="alpha"),
        requester=requester,
        requested={"nvidia.com/gpu": 8},
        gpus=8,
        priority=100000,
        priority_class="train-high",
        justification="release 2026.12 blocker: regression in eval",
        impact={
            "computed_at": now.isoformat(),
            "preempts": [VICTIM],
            "gpus_preempted": 8,
            "gpu_hours_lost": 2.67,
            "summary": "1 running workload (8 GPUs) makes room for it; 2.67 GPU-hours of its "
            "work is lost",
        },
        created_at=now,
        expires_at=now + timedelta(hours=4),
    )
    ApprovalEvent.objects.create(request=request, action=ApprovalAction.REQUESTED, at=now)
    return request


def sign_in(page: Page, username: str) -> None:
    login(page, username, f"{username}-password")  # what tests.factories.user gives everyone
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def assert_only_local_requests(guard: Guard, base_url: str) -> None:
    assert guard.requests, "the page made no request at all"
    assert all(url.startswith(f"{base_url}/") for url in guard.requests), guard.requests


def test_an_approver_is_refused_a_reject_without_reason_then_approves(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any]
) -> None:
    request: ApprovalRequest = org["request"]
    sign_in(page, "approver-a")
    nav = page.locator("#nav-approvals")
    expect(nav.locator(".nav-badge")).to_have_text("1")
    nav.click()

    expect(page.locator("h1")).to_have_text("Approvals")
    row = page.locator(f'#to-decide tr[data-approval="{request.pk}"]')
    expect(row).to_contain_text("member-a")
    expect(row).to_contain_text("release 2026.12 blocker")
    expect(row.locator('[data-col="gpu-hours-lost"]')).to_have_text("2.67")
    expect(row.locator('[data-col="left"]')).to_contain_text("left")
    screenshot(page, "approvals-inbox-approver")
    row.get_by_role("link", name=f"#{request.pk}").click()

    expect(page.locator("h1")).to_contain_text(f"Approval #{request.pk}")
    victim = page.locator('#impact-table tr[data-victim="beta/job-nightly-eval"]')
    expect(victim).to_contain_text("would be preempted")
    expect(victim).to_contain_text("20 min")  # since the last checkpoint

    page.locator("#reject-form").get_by_role("button", name="Reject").click()
    expect(page.locator("#reason-error")).to_contain_text("a reason is required to reject")
    expect(page.locator("#reject-reason")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#approval-state")).to_have_text("pending")
    request.refresh_from_db()
    assert (request.state, request.decided_by) == (ApprovalState.PENDING, None)
    screenshot(page, "approval-reject-without-reason")

    page.get_by_label("Comment").fill("release blocker: go")
    page.locator("#approve-form").get_by_role("button", name="Approve").click()
    expect(page.locator("#approval-messages")).to_contain_text(f"Approved approval #{request.pk}")
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED
    assert request.decided_by is not None and request.comment == "release blocker: go"
    expect(page.locator("#approval-state")).to_have_text(request.state)
    expect(page.locator("[data-decided-by]")).to_have_text(request.decided_by.get_username())
    expect(page.locator("#approval-decision")).to_contain_text("release blocker: go")
    expect(page.locator("#approve-form")).to_have_count(0)
    expect(page.locator("#reject-form")).to_have_count(0)
    expect(page.locator('#approval-audit tr[data-action="approved"]')).to_contain_text("approver-a")
    expect(page.locator("#nav-approvals .nav-badge")).to_have_count(0)  # nothing left to decide
    screenshot(page, "approval-approved")
    assert_only_local_requests(guard, base_url)


def test_the_inbox_shows_a_new_request_without_a_reload(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any]
) -> None:
    sign_in(page, "global-approver")
    page.goto("/approvals/")
    expect(page.locator("#to-decide tr[data-approval]")).to_have_count(1)
    later = asked(org["member_a"], "uid-alpha-2", "job-hotfix")
    expect(page.locator(f'#to-decide tr[data-approval="{later.pk}"]')).to_be_visible(timeout=6000)
    expect(page.locator("#nav-approvals .nav-badge")).to_have_text("2")
    expect(page.locator("#last-updated")).to_contain_text("updated")
    screenshot(page, "approvals-inbox-live")
    assert_only_local_requests(guard, base_url)


def test_a_member_follows_the_request_read_only(
    page: Page, guard: Guard, base_url: str, org: dict[str, Any]
) -> None:
    request: ApprovalRequest = org["request"]
    sign_in(page, "member-a")
    page.goto(f"/approvals/{request.pk}/")
    expect(page.locator("#read-only")).to_contain_text("you submitted this job")
    expect(page.locator("#approve-form")).to_have_count(0)
    screenshot(page, "approval-requester")
    response = page.goto("/approvals/history/")
    assert response is not None and response.ok
    expect(page.locator('#history-table tr[data-action="requested"]')).to_have_count(1)
    assert_only_local_requests(guard, base_url)
