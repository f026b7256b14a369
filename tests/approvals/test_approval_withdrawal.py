"""Approvals tell the truth about who was told. A withdrawn request is said to
the requester and to the approvers who were told of it, on the channels the
request went out on (e-mail, the webhook), and the audit trail says why and
whom it reached; "notified" names only the people a message reached."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.core import mail

from approvals.controller import drive_approvals
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from approvals.notify import notify_approvers
from jobs.models import JobRequest, JobState
from tests.approvals.approval_support import approval_request, approvers
from tests.approvals.test_approval_impact import fill_the_cohort
from tests.approvals.test_approval_notify import Hook
from tests.approvals.test_approvals_flow import URGENT, raise_request
from tests.factories import user
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import URL, Cluster


@pytest.fixture
def hook(settings: Any) -> Iterator[Hook]:
    server = Hook(200)
    settings.BERTH_APPROVAL_WEBHOOK_URL = server.url
    yield server
    server.close()


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    found = approvers()
    alice = org.users["alice"]
    alice.email = "alice@example.com"
    alice.save(update_fields=["email"])
    return found


def reach(cluster: Cluster, job_id: int, t0: float) -> None:
    for step in range(1, 6):
        cluster.at(t0 + step)
        if JobRequest.objects.get(pk=job_id).state == JobState.QUOTA_RESERVED:
            return
    raise AssertionError(f"job {job_id} never reserved quota")


def test_a_request_preempted_while_waiting_is_withdrawn_and_everyone_told_is_told(
    org: Org, people: dict[str, Any], hook: Hook
) -> None:
    """A low-priority urgent job waits for approval; a higher-priority one comes
    and Kueue preempts the waiting one (it holds quota only as a reservation).
    Its request is withdrawn: alice, carol and erin get the news by e-mail and
    the webhook channel too. The newcomer's preview shows the waiting one as
    what it was: not running, nothing lost."""
    cluster = Cluster()
    t0 = time.time()
    fill_the_cohort(cluster, org)
    cluster.at(t0 - 300)
    first = cluster.submit(
        org.alice, **{**URGENT, "name": "eval-fix", "priority_class": "train-low"}
    )
    reach(cluster, first, t0)
    drive_approvals(cluster.backend)
    waiting = ApprovalRequest.objects.get(job_id=first)
    assert waiting.state == ApprovalState.PENDING and waiting.notified_at is not None
    assert len(mail.outbox) == 1 and len(hook.received) == 1
    mail.outbox.clear()

    second = cluster.submit(org.alice, **URGENT)
    reach(cluster, second, t0 + 10)
    assert JobRequest.objects.get(pk=first).state == JobState.QUEUED  # lost its reservation
    result = drive_approvals(cluster.backend)
    assert result["withdrawn"] == 1 and result["raised"] == 1

    waiting.refresh_from_db()
    assert waiting.state == ApprovalState.WITHDRAWN
    assert "preempted" in waiting.comment and "research/job-release-fix" in waiting.comment
    withdrawn = waiting.events.get(action=ApprovalAction.WITHDRAWN)
    assert withdrawn.message == f"withdrawn before anyone decided: {waiting.comment}"
    told = [m for m in mail.outbox if f"Approval #{waiting.pk}" in m.subject]
    assert len(told) == 1
    assert sorted(told[0].to) == ["alice@example.com", "carol@example.com", "erin@example.com"]
    assert "withdrawn" in told[0].subject.lower() and waiting.comment in told[0].body
    notice = waiting.events.filter(action=ApprovalAction.NOTIFIED).order_by("at", "id").last()
    assert notice is not None and notice.details["about"] == "withdrawn"
    assert notice.message.startswith("withdrawal: told alice, carol, erin by e-mail")
    assert "webhook 127.0.0.1" in notice.message
    posts = [p["body"] for p in hook.received if p["body"]["berth"]["approval_id"] == waiting.pk]
    assert [p["berth"]["state"] for p in posts] == ["pending", "withdrawn"]
    assert waiting.comment in posts[-1]["text"]

    newcomer = ApprovalRequest.objects.get(job_id=second)
    [victim] = newcomer.impact["preempts"]
    assert victim["workload"] == "research/job-eval-fix"
    assert (victim["status"], victim["state"]) == ("preempted", "reserved")
    assert victim["gpu_hours_lost"] == 0 and victim["running_seconds"] == 0
    assert "waiting for approval" in newcomer.impact["summary"]


def test_a_cancelled_jobs_request_is_withdrawn_saying_who_cancelled(
    org: Org, people: dict[str, Any]
) -> None:
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    mail.outbox.clear()
    assert org.alice.delete(f"{URL}{job_id}/").status_code == 202
    assert drive_approvals(cluster.backend)["withdrawn"] == 1
    request.refresh_from_db()
    assert request.comment == "its job release-fix was cancelled by alice"
    [told] = mail.outbox
    assert sorted(told.to) == ["alice@example.com", "carol@example.com", "erin@example.com"]
    assert "cancelled by alice" in told.body
    assert drive_approvals(cluster.backend)["withdrawn"] == 0
    assert len(mail.outbox) == 1  # told once


def test_a_request_withdrawn_before_anyone_was_told_tells_only_the_requester(
    org: Org, people: dict[str, Any], hook: Hook
) -> None:
    cluster = Cluster()
    job_id = cluster.submit(org.alice, **URGENT)
    cluster.at(time.time())
    request = approval_request(
        org.users["alice"],
        job=JobRequest.objects.get(pk=job_id),
        workload_uid=JobRequest.objects.get(pk=job_id).workload.uid,  # type: ignore[union-attr]
    )
    JobRequest.objects.filter(pk=job_id).update(
        state=JobState.CANCELLING, message="cancelled by bob"
    )
    assert drive_approvals(cluster.backend)["withdrawn"] == 1
    [told] = mail.outbox
    assert told.to == ["alice@example.com"]
    assert hook.received == []  # the channel never heard of it
    notice = request.events.get(action=ApprovalAction.NOTIFIED)
    assert notice.message == "withdrawal: told alice by e-mail"


def test_notified_names_only_the_people_reached(org: Org, hook: Hook) -> None:
    """rita approves for research too but has no e-mail address: she is not
    claimed as notified; the webhook is named as the channel it is (its host,
    not its secret path)."""
    approvers()
    rita = user("rita")
    from queues import services
    from queues.models import Team

    services.set_membership(
        actor=None, team=Team.objects.get(slug="research"), username="rita", role="approver",
        present=True,
    )  # fmt: skip
    request = approval_request(org.users["alice"])
    sent = notify_approvers(request)
    assert sent["approvers"] == ["carol", "erin", "rita"]
    assert sent["emailed"] == ["carol", "erin"] and sent["unreached"] == ["rita"]
    event = request.events.get(action=ApprovalAction.NOTIFIED)
    assert event.message == (
        "told carol, erin by e-mail; webhook 127.0.0.1 (HTTP 200); "
        "not reached: rita (no e-mail address)"
    )
    assert "/services/" not in event.message
    assert rita.username not in event.message.split(";")[0]


def test_nobody_reached_is_not_called_notified(org: Org) -> None:
    """An approver without an e-mail address and no webhook: nobody was told,
    and the audit says so instead of claiming a notification."""
    rita = user("rita")
    from queues import services
    from queues.models import Team

    services.set_membership(
        actor=None, team=Team.objects.get(slug="research"), username="rita", role="approver",
        present=True,
    )  # fmt: skip
    request = approval_request(org.users["alice"])
    notify_approvers(request)
    assert not mail.outbox
    assert not request.events.filter(action=ApprovalAction.NOTIFIED).exists()
    failed = request.events.get(action=ApprovalAction.NOTIFY_FAILED)
    assert failed.message == (
        "nobody was reached: rita has no e-mail address and no webhook is set "
        "(BERTH_APPROVAL_WEBHOOK_URL); the request waits in the approvals inbox"
    )
    assert rita.email == ""
