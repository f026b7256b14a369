"""A request answers one quota reservation. When Kueue evicts the workload
before a decision is written, or before anyone decides, that request is done
with, and the workload's next reservation is asked about afresh."""

from __future__ import annotations

import time
from typing import Any

import pytest

from approvals.controller import drive_approvals
from approvals.decide import decide
from approvals.models import ApprovalAction, ApprovalRequest, ApprovalState
from jobs.models import JobState
from tests.approvals.approval_support import approvers
from tests.approvals.test_approvals_flow import (
    _evict_and_return,
    raise_request,
    state,
    workload_check,
)
from tests.jobs.conftest import Org
from tests.jobs.simulated_cluster import Cluster


@pytest.fixture
def people(org: Org) -> dict[str, Any]:
    return approvers()


def test_an_approval_not_yet_written_when_kueue_evicts_is_superseded(
    org: Org, people: dict[str, Any], settings: Any
) -> None:
    settings.BERTH_APPROVAL_GRACE = 0  # no carrying the approval over
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    decide(people["carol"], request.pk, approve=True)  # its write is lost (no on-commit)
    _evict_and_return(cluster, job_id, t0 + 2)  # a new reservation, check Pending
    assert state(job_id) == JobState.QUOTA_RESERVED

    result = drive_approvals(cluster.backend)
    request.refresh_from_db()
    assert request.applied_at is not None
    assert "superseded" in request.events.get(action=ApprovalAction.APPLIED).message
    # The new reservation is asked about; the old approval was not written to it.
    assert result["raised"] == 1
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.PENDING
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Pending"


def test_within_the_grace_window_an_unwritten_approval_carries_over(
    org: Org, people: dict[str, Any], settings: Any
) -> None:
    settings.BERTH_APPROVAL_GRACE = 15 * 60
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    decide(people["carol"], request.pk, approve=True)
    _evict_and_return(cluster, job_id, t0 + 2)
    result = drive_approvals(cluster.backend)
    assert result["reapproved"] == 1 and result["raised"] == 0
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.APPROVED and again.reapproval_of == request
    # The first approval was not written to the new reservation; the re-approval was.
    request.refresh_from_db()
    assert request.written is False
    assert "superseded" in request.events.get(action=ApprovalAction.APPLIED).message
    again.refresh_from_db()
    assert again.written is True
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Ready"
    assert "Re-approved" in check["message"]
    cluster.at(t0 + 4)
    assert state(job_id) == JobState.RUNNING


def test_an_unwritten_rejection_stands_for_the_next_reservation(
    org: Org, people: dict[str, Any], settings: Any
) -> None:
    """A rejection accepted just after the reservation it answered ended is
    not lost: the next reservation is rejected by it, and nobody is asked to
    approve what an approver refused."""
    settings.BERTH_APPROVAL_GRACE = 15 * 60
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    decide(people["carol"], request.pk, approve=False, comment="not a release blocker")
    _evict_and_return(cluster, job_id, t0 + 2)  # the rejection's write is lost
    result = drive_approvals(cluster.backend)
    assert result["raised"] == 0  # nobody is asked again
    request.refresh_from_db()
    assert request.written is False
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.REJECTED and again.decided_by == people["carol"]
    assert "not a release blocker" in again.comment and f"#{request.pk}" in again.comment
    again.refresh_from_db()
    assert again.written is True
    check = workload_check(cluster, job_id)
    assert check is not None and check["state"] == "Rejected"


def test_a_workload_evicted_before_anyone_decides_is_asked_again(
    org: Org, people: dict[str, Any]
) -> None:
    cluster = Cluster()
    t0 = time.time()
    job_id, request = raise_request(cluster, org, t0)
    _evict_and_return(cluster, job_id, t0 + 2)
    result = drive_approvals(cluster.backend)
    assert result["withdrawn"] == 1 and result["raised"] == 1
    request.refresh_from_db()
    assert request.state == ApprovalState.WITHDRAWN
    again = ApprovalRequest.objects.get(job_id=job_id, attempt=2)
    assert again.state == ApprovalState.PENDING and again.reserved_at != request.reserved_at
    # A decision on the old request is refused: it no longer answers anything.
    from approvals.decide import AlreadyDecided

    with pytest.raises(AlreadyDecided):
        decide(people["carol"], request.pk, approve=True)
    assert drive_approvals(cluster.backend)["raised"] == 0  # asked once per reservation
