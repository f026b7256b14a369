"""The approval workflow end to end on the simulated cluster: an urgent-release
job reserves quota, its check goes Pending, Berth raises a request with the
impact preview and tells the approvers; the decision is written to the
Workload and Kueue admits (or deactivates) it."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.core import mail

from approvals.controller import drive_approvals
from approvals.decide import decide
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from approvals.status import CHECK_NAME, check_of
from jobs.models import JobRequest, JobState
from queues.backends.base import TYPES
from tests.approvals.approval_support import approvers
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import URL, Cluster

URGENT = {
    "name": "release-fix",
    "queue": "urgent-release",
    "nodes": 1,
    "priority_class": "train-high",
    "justification": "release 2026.12 is blocked on this eval regression",
    "expected_runtime_seconds": 600,
}


def state(job_id: int) -> str:
    return JobRequest.objects.get(pk=job_id).state


def workload_check(cluster: Cluster, job_id: int) -> dict[str, Any] | None:
    job = JobRequest.objects.get(pk=job_id)
    assert job.workload is not None
    found = cluster.backend.get(TYPES["Workload"], job.workload.name, job.namespace)
    assert found is not None
    return check_of(found)


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    return approvers()


def raise_request(cluster: Cluster, org: Org, t0: float) -> tuple[int, ApprovalRequest]:
    job_id = cluster.submit(org.alice, **URGENT)
    cluster.at(t0)
    assert state(job_id) == JobState.QUOTA_RESERVED
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Pending"
    result = drive_approvals(cluster.backend)
    assert result["raised"] == 1
    return job_id, ApprovalRequest.objects.get(job_id=job_id)


def test_approved_job_is_admitted_and_runs(
    org: Org, people: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    assert request.state == ApprovalState.PENDING and request.attempt == 1
    assert request.requester == org.users["alice"] and request.team.slug == "research"
    assert request.gpus == 8 and request.justification == URGENT["justification"]
    assert request.impact["preempts"] == [] and "No running workload" in request.impact["summary"]
    # The approvers were told: carol (research's approver) and erin (global), not alice.
    assert len(mail.outbox) == 1
    assert sorted(mail.outbox[0].to) == ["carol@example.com", "erin@example.com"]
    assert f"/approvals/{request.pk}/" in mail.outbox[0].body
    assert drive_approvals(cluster.backend)["raised"] == 0  # raised once

    with django_capture_on_commit_callbacks(execute=True):
        decide(people["carol"], request.pk, approve=True, comment="go")
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED and request.applied_at is not None
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Ready"
    assert "carol" in check["message"] and check["lastTransitionTime"]

    cluster.at(t0 + 1)
    assert state(job_id) == JobState.RUNNING
    actions = list(request.events.values_list("action", flat=True))
    assert actions == [
        ApprovalAction.REQUESTED,
        ApprovalAction.NOTIFIED,
        ApprovalAction.APPROVED,
        ApprovalAction.APPLIED,
    ]
    timeline = [e["type"] for e in org.alice.get(f"{URL}{job_id}/events/").json()]
    assert "approval-approved" in timeline and "approval-requested" in timeline


def test_rejected_job_is_deactivated_with_the_reason(
    org: Org, people: dict[str, Any], django_capture_on_commit_callbacks: Any
) -> None:
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    with django_capture_on_commit_callbacks(execute=True):
        decide(people["erin"], request.pk, approve=False, comment="not release-blocking")
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Rejected"
    assert "not release-blocking" in check["message"]

    cluster.at(t0 + 1)
    job = JobRequest.objects.get(pk=job_id)
    assert job.state == JobState.REJECTED
    assert job.workload is not None and job.workload.state == "deactivated"
    found = cluster.backend.get(TYPES["Workload"], job.workload.name, job.namespace)
    assert found is not None and found["spec"]["active"] is False
    assert not (found.get("status") or {}).get("admission")  # quota released


def test_a_decision_lost_before_the_patch_is_redriven(org: Org, people: dict[str, Any]) -> None:
    """The worker dies after the decision commits and before it patches: the
    apply task never runs (its on-commit callback is dropped here)."""
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    decide(people["carol"], request.pk, approve=True)  # the test transaction: no on-commit
    request.refresh_from_db()
    assert request.state == ApprovalState.APPROVED and request.applied_at is None
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Pending"

    assert drive_approvals(cluster.backend)["applied"] == 1
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Ready"
    assert drive_approvals(cluster.backend)["applied"] == 0  # nothing left to write
    cluster.at(t0 + 1)
    assert state(job_id) == JobState.RUNNING


def test_an_undecided_request_expires_at_its_deadline(
    org: Org, people: dict[str, Any], settings: Any
) -> None:
    settings.BERTH_APPROVAL_TIMEOUT = 4 * 60 * 60
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    assert request.expires_at == request.created_at + timedelta(hours=4)

    drive_approvals(cluster.backend, now=request.expires_at - timedelta(seconds=1))
    request.refresh_from_db()
    assert request.state == ApprovalState.PENDING

    result = drive_approvals(cluster.backend, now=request.expires_at)
    assert result["expired"] == 1 and result["applied"] == 1
    request.refresh_from_db()
    assert request.state == ApprovalState.EXPIRED and request.decided_by is None
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Rejected"
    assert "expired" in check["message"]
    cluster.at(t0 + 1)
    assert state(job_id) == JobState.REJECTED


def _evict_and_return(cluster: Cluster, job_id: int, at: float) -> None:
    """Kueue evicts the admitted workload (say, its node failed) and it
    reserves quota again in the next cycle, its check reset to Pending."""
    job = JobRequest.objects.get(pk=job_id)
    assert job.workload is not None
    obj = cluster.backend.get(TYPES["Workload"], job.workload.name, job.namespace)
    assert obj is not None
    cluster.kueue._evict(obj, "NodeFailures", "the node went away", at)
    cluster.at(at + 1)


def test_an_evicted_approved_workload_back_within_the_grace_window_keeps_its_approval(
    org: Org, people: dict[str, Any], settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.BERTH_APPROVAL_GRACE = 15 * 60
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    with django_capture_on_commit_callbacks(execute=True):
        decide(people["carol"], request.pk, approve=True)
    cluster.at(t0 + 1)
    assert state(job_id) == JobState.RUNNING

    _evict_and_return(cluster, job_id, t0 + 2)
    assert state(job_id) == JobState.QUOTA_RESERVED
    mail.outbox.clear()
    result = drive_approvals(cluster.backend)
    assert result["reapproved"] == 1 and result["raised"] == 0
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.APPROVED and again.reapproval_of == request
    assert again.applied_at is not None and not mail.outbox
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Ready"
    cluster.at(t0 + 4)
    assert state(job_id) == JobState.RUNNING


def test_an_evicted_approved_workload_back_after_the_grace_window_is_asked_again(
    org: Org, people: dict[str, Any], settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    settings.BERTH_APPROVAL_GRACE = 0
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    with django_capture_on_commit_callbacks(execute=True):
        decide(people["carol"], request.pk, approve=True)
    cluster.at(t0 + 1)
    _evict_and_return(cluster, job_id, t0 + 2)
    mail.outbox.clear()
    result = drive_approvals(cluster.backend)
    assert result["raised"] == 1 and result["reapproved"] == 0
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.PENDING and len(mail.outbox) == 1
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Pending"


def test_a_request_is_withdrawn_when_its_job_is_cancelled(org: Org, people: dict[str, Any]) -> None:
    """Cancelled, its delete not yet done: the workload still holds its quota."""
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    assert org.alice.delete(f"{URL}{job_id}/").status_code == 202  # the delete task waits
    assert state(job_id) == JobState.CANCELLING
    assert workload_check(cluster, job_id) is not None  # still reserved, still Pending
    assert drive_approvals(cluster.backend)["withdrawn"] == 1
    request.refresh_from_db()
    assert request.state == ApprovalState.WITHDRAWN
    assert request.events.filter(action=ApprovalAction.WITHDRAWN).count() == 1
    again = drive_approvals(cluster.backend)
    assert (again["withdrawn"], again["raised"]) == (0, 0)  # once, and nobody asked again


def test_a_stale_status_write_is_refused(org: Org) -> None:
    """The precondition a decision's write carries: the version it read."""
    from queues.backends.base import BackendError

    cluster = Cluster()
    job_id = cluster.submit(org.alice, **URGENT)
    cluster.at(time.time())
    job = JobRequest.objects.get(pk=job_id)
    assert job.workload is not None
    read = cluster.backend.get(TYPES["Workload"], job.workload.name, job.namespace)
    assert read is not None
    cluster.backend.patch_status(
        TYPES["Workload"], job.workload.name, job.namespace, {"requeueState": {"count": 1}}
    )  # someone else wrote meanwhile
    with pytest.raises(BackendError) as refused:
        cluster.backend.patch_status(
            TYPES["Workload"],
            job.workload.name,
            job.namespace,
            {"admissionChecks": []},
            resource_version=read["metadata"]["resourceVersion"],
        )
    assert refused.value.status == 409 and refused.value.transient


def test_the_admission_check_is_kept_active(org: Org) -> None:
    cluster = Cluster()
    check = cluster.backend.get(TYPES["AdmissionCheck"], CHECK_NAME)
    assert check is not None
    assert drive_approvals(cluster.backend)["activated"] == 1
    check = cluster.backend.get(TYPES["AdmissionCheck"], CHECK_NAME)
    assert check is not None
    active = [c for c in check["status"]["conditions"] if c["type"] == "Active"]
    assert active and active[0]["status"] == "True"
    assert drive_approvals(cluster.backend)["activated"] == 0  # already Active: no write
